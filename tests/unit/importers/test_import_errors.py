"""Other tools' files that are broken, truncated or odd: every one is read, or refused
with one line naming the file, the format its content showed and what is wrong; never
a traceback (docs/design.md section 10)."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from import_samples import SAMPLES, aiperf_records, guidellm, inference_perf_requests, vllm
from typer.testing import CliRunner

from infersight.cli._app import app
from infersight.core.errors import ConfigError
from infersight.diagnose import diagnose_run
from infersight.importers import detect, import_bytes, load_result, missing_evidence
from infersight.importers.common import Malformed
from infersight.importers.tool_stats import tool_metric

FORMATS = sorted(SAMPLES)
AGGREGATES_ONLY = ("aiperf-summary", "inference-perf-summary")


@pytest.mark.parametrize("fmt", FORMATS)
def test_each_format_is_told_by_content_and_read(fmt: str, tmp_path: Path) -> None:
    data, _ = SAMPLES[fmt]
    assert detect(data) == fmt
    p = tmp_path / "result.bin"  # the name says nothing
    p.write_bytes(data)
    run = load_result(p)
    assert run.config["imported"]["format"] in (fmt, fmt.replace("summary", "records"))
    if fmt in AGGREGATES_ONLY:
        assert not run.records and run.config["imported"]["has_requests"] is False
        undecided = missing_evidence(run)
        assert [v.id for v in undecided] == ["undecided"] * len(run.aggregates)
        assert "per-request timings" in undecided[0].evidence[0].value
        assert undecided[0].fixes and "keep per-request timings" in undecided[0].fixes[0]
    else:
        assert run.records and all(r.ok and r.output_tokens == 16 for r in run.records)
        assert all(len(r.chunk_times) == 16 for r in run.records)
        assert missing_evidence(run) == []
        assert diagnose_run(run).verdicts


def _one_line(msg: str, source: str) -> None:
    assert "\n" not in msg and msg.startswith(source), msg


@pytest.mark.parametrize("fmt", FORMATS)
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(frac=st.floats(0.0, 0.999))
def test_truncated_files_fail_in_one_line_naming_the_format(
    fmt: str, frac: float, tmp_path: Path
) -> None:
    data, label = SAMPLES[fmt]
    cut = data[: int(len(data) * frac)]
    p = tmp_path / "cut.json"
    p.write_bytes(cut)
    try:
        load_result(p)  # a JSON Lines file cut at a line's end is still a file of fewer lines
    except ConfigError as e:
        _one_line(str(e), str(p))
        if detect(cut) is not None or len(cut) > 200:
            # past its first keys the content still shows the format
            assert label in str(e), str(e)


def _leaves(doc: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [path]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _leaves(v, (*path, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc[:3]):
            out += _leaves(v, (*path, i))
    return out


_ODD = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**20), 10**20),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=5),
    st.lists(st.integers(-5, 5), max_size=3),
    st.just({}),
    st.just([]),
)
_DOCS = {
    "guidellm": guidellm(2),
    "inference-perf-requests": inference_perf_requests(2),
    "vllm": vllm(2),
    "aiperf-summary": json.loads(SAMPLES["aiperf-summary"][0]),
    "inference-perf-summary": json.loads(SAMPLES["inference-perf-summary"][0]),
}


@pytest.mark.parametrize("fmt", sorted(_DOCS))
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_odd_values_are_read_or_refused_in_one_line(fmt: str, data: st.DataObject) -> None:
    doc = copy.deepcopy(_DOCS[fmt])
    paths = _leaves(doc)
    path = data.draw(st.sampled_from(paths[1:]))
    value = data.draw(_ODD)
    node = doc
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    raw = json.dumps(doc).encode()
    try:
        run = import_bytes(raw, "odd.json")
    except ConfigError as e:
        _one_line(str(e), "odd.json")
        return
    diagnose_run(run)  # what was read can be diagnosed


def test_aiperf_records_a_bad_line_is_named(tmp_path: Path) -> None:
    lines = [json.dumps(r) for r in aiperf_records(3)]
    lines[1] = lines[1][:40]
    p = tmp_path / "profile_export.jsonl"
    p.write_text("\n".join(lines) + "\n")
    with pytest.raises(ConfigError) as e:
        load_result(p)
    msg = str(e.value)
    _one_line(msg, str(p))
    assert "AIPerf per-request export (JSON Lines)" in msg and "line 2" in msg


@pytest.mark.parametrize(
    "fmt, edit, words",
    [
        (
            "guidellm",
            lambda d: d["benchmarks"][0]["config"].pop("strategy"),
            "benchmarks[0].config has no 'strategy'",
        ),
        (
            "guidellm",
            lambda d: d["benchmarks"][0]["config"]["strategy"].update(type_="sweepy"),
            "strategy 'sweepy' is not one GuideLLM writes",
        ),
        ("guidellm", lambda d: d.update(benchmarks=[]), "holds no load level"),
        ("vllm", lambda d: d["itls"].pop(), "itls has 2 entries for 3 requests"),
        ("vllm", lambda d: d["start_times"].__setitem__(0, "soon"), "start_times[0] is 'soon'"),
        (
            "inference-perf-requests",
            lambda d: d[0].update(start_time="x"),
            "request 0.start_time is str, not int or float",
        ),
        (  # a token time in the middle counts as much as the first and last
            "inference-perf-requests",
            lambda d: d[0]["info"]["response_metrics"]["output_token_times"].__setitem__(3, 1e308),
            "(more than 30): a timestamp is in another unit or clock",
        ),
    ],
)
def test_broken_structures_say_what_is_wrong(fmt: str, edit: Any, words: str) -> None:
    doc = json.loads(SAMPLES[fmt][0])
    edit(doc)
    with pytest.raises(ConfigError) as e:
        import_bytes(json.dumps(doc).encode(), "f.json", fmt)
    msg = str(e.value)
    _one_line(msg, "f.json")
    assert SAMPLES[fmt][1] in msg and words in msg, msg


def test_cli_diagnose_truncated_file_is_one_line_and_exit_2(tmp_path: Path) -> None:
    data, label = SAMPLES["guidellm"]
    p = tmp_path / "benchmarks.json"
    p.write_bytes(data[: len(data) // 2])
    proc = subprocess.run(
        [sys.executable, "-c", "from infersight.cli import main; main()", "diagnose", str(p)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.startswith(
        f"error: {p}: read as {label} (from its content): not valid JSON"
    ), proc.stderr
    assert "(truncated?)" in proc.stderr


def test_cli_report_refuses_a_broken_file_in_one_line(tmp_path: Path) -> None:
    good = tmp_path / "a.json"
    good.write_bytes(SAMPLES["vllm"][0])
    bad = tmp_path / "b.json"
    bad.write_bytes(SAMPLES["aiperf-summary"][0][:-30])
    res = CliRunner().invoke(app, ["report", str(good), str(bad), "-o", str(tmp_path / "r.html")])
    assert isinstance(res.exception, ConfigError), res.output
    _one_line(str(res.exception), str(bad))
    assert "AIPerf aggregate export JSON" in str(res.exception)


def test_cli_diagnose_aggregates_only_says_what_is_missing(tmp_path: Path) -> None:
    p = tmp_path / "summary_lifecycle_metrics.json"
    p.write_bytes(SAMPLES["inference-perf-summary"][0])
    res = CliRunner().invoke(app, ["diagnose", str(p), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    [v] = doc["verdicts"]
    assert v["id"] == "undecided" and v["level"] == "c=2"
    assert "per-request timings" in v["evidence"][0]["value"]
    assert "per_request" in v["fixes"][0]
    res = CliRunner().invoke(app, ["diagnose", str(p)])
    assert res.exit_code == 0 and "Not decided" in res.stdout, res.stdout


def test_a_tools_per_request_metric_past_any_request_is_refused() -> None:
    with pytest.raises(Malformed) as e:
        tool_metric("vLLM's TPOT: (latency - TTFT) / ...", ours=None, values=[0.01, 1e308])
    assert str(e.value) == (
        "vLLM's TPOT holds 1e+308 s for one request: longer than the 30 days a result may span"
    )
