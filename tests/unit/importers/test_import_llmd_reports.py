"""llm-d benchmark reports read by ``diagnose`` and ``report`` (importers.llmd): our own
0.2.1 reports give back the run's verdict and fix, in JSON and YAML; the 0.1 line and
the package's own examples have aggregates only, and the verdict names what is
missing; broken reports are refused in one line (docs/design.md section 10)."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from importlib.resources import files
from pathlib import Path

import orjson
import pytest
import yaml
from llmd_benchmark_report import import_benchmark_report
from typer.testing import CliRunner

from infersight.cli._app import app
from infersight.core.errors import ConfigError
from infersight.diagnose import diagnose_run
from infersight.entrypoints.diagnose import load_inputs
from infersight.importers import detect, load_result, missing_evidence
from infersight.report.llmd.writer import write_llmd
from infersight.report.view import build_view
from infersight_testkit.agreement import advice
from infersight_testkit.synthetic_runs import make_run

EXAMPLES = ("br_v0_1_example.yaml", "br_v0_2_example.yaml")


def _same_advice(a: object, b: object) -> dict[str, object]:
    """The fields of two runs' advice that differ (empty: the same verdict and fix)."""
    da, db = dataclasses.asdict(advice(a)), dataclasses.asdict(advice(b))  # type: ignore[arg-type]
    return {k: (da[k], db[k]) for k in da if da[k] != db[k]}


def _verdicts(found: object) -> list[tuple[str, str | None]]:
    return sorted((v.id, v.level) for v in found.verdicts)  # type: ignore[attr-defined]


@pytest.mark.parametrize(("error_rate", "gpu"), [(0.0, True), (0.02, False)])
def test_our_reports_give_back_the_runs_verdict_and_fix(
    error_rate: float, gpu: bool, tmp_path: Path
) -> None:
    run = make_run(1200, levels=(1, 4, 16), seed=3, gpu=gpu, error_rate=error_rate)
    before = diagnose_run(run)
    paths = write_llmd(run, tmp_path)
    assert all(detect(p.read_bytes()) == "llmd" for p in paths)
    inputs = load_inputs(paths)
    assert len(inputs) == 1  # one run's reports (one run.eid) joined
    back = inputs[0][1]
    assert [lv["name"] for lv in back.config["levels"]] == ["c=1", "c=4", "c=16"]
    assert len(back.records) == len(run.records)
    assert sum(not r.ok for r in back.records) == sum(not r.ok for r in run.records)
    assert {s.name for s in back.samples} >= {"engine.requests_running"}
    after = diagnose_run(back)
    assert _same_advice(before, after) == {}
    assert _verdicts(after) == _verdicts(before)
    assert missing_evidence(back) == []  # decided, not undecided


def test_a_yaml_report_reads_as_its_json(tmp_path: Path) -> None:
    run = make_run(600, levels=(1, 8), seed=6, error_rate=0.0)
    paths = write_llmd(run, tmp_path / "json")
    yamls = []
    for p in paths:
        y = tmp_path / p.with_suffix(".yaml").name
        import_benchmark_report(str(p)).export_yaml(str(y))  # the package's own YAML
        yamls.append(y)
    from_json, from_yaml = load_inputs(paths)[0][1], load_inputs(yamls)[0][1]
    assert detect(yamls[0].read_bytes()) == "llmd"
    pairs = [
        (a, b)
        for ra, rb in zip(from_json.records, from_yaml.records, strict=True)
        for a, b in zip(ra.chunk_times, rb.chunk_times, strict=True)
    ]
    assert pairs and max(abs(a - b) for a, b in pairs) < 1e-6
    assert _same_advice(diagnose_run(from_json), diagnose_run(from_yaml)) == {}


def test_the_0_1_line_is_aggregates_only_and_names_what_is_missing(tmp_path: Path) -> None:
    run = make_run(600, levels=(1, 4), seed=7)
    p = write_llmd(run, tmp_path, version="0.1")[0]
    back = load_result(p)
    assert not back.records
    agg = back.aggregates["c=1"]
    ours = build_view(run).levels[0].agg
    assert agg["ttft"]["p50"] == pytest.approx(ours["ttft"]["p50"])
    assert agg["request_throughput"] == pytest.approx(ours["request_throughput"])
    (undecided,) = missing_evidence(back)
    assert undecided.id == "undecided" and undecided.level == "c=1"
    assert "per-request timings" in str(undecided.evidence[0].value)
    assert "bench --format llm-d" in undecided.fixes[0]


@pytest.mark.parametrize("name", EXAMPLES)
def test_the_packages_examples_are_read_as_aggregates(name: str) -> None:
    path = Path(str(files("llmd_benchmark_report") / name))
    doc = yaml.safe_load(path.read_bytes())
    assert detect(path.read_bytes()) == "llmd"
    run = load_result(path)
    assert not run.records
    (level,) = run.aggregates.values()
    if name == "br_v0_2_example.yaml":
        ttft = doc["results"]["request_performance"]["aggregate"]["latency"]
        want = ttft["time_to_first_token"]["p50"]  # in s
        assert (
            run.config["levels"][0]["rate"] == doc["scenario"]["load"]["standardized"]["rate_qps"]
        )
    else:
        want = doc["metrics"]["latency"]["time_to_first_token"]["p50"] / 1000  # in ms
    assert level["ttft"]["p50"] == pytest.approx(want)
    assert not diagnose_run(run).verdicts
    (undecided,) = missing_evidence(run)
    assert "per-request timings" in str(undecided.evidence[0].value)
    assert "engine telemetry" in str(undecided.evidence[0].value)


def test_a_minimal_report_is_one_level_of_nothing_decided(tmp_path: Path) -> None:
    """The least the package accepts (a uid and empty results) still reads, in one line
    of what is missing."""
    p = tmp_path / "minimal.yaml"
    p.write_text("version: '0.2.1'\nrun: {uid: x}\nresults: {}\n")
    run = load_result(p)
    assert list(run.aggregates) == ["stage 0"] and not run.records
    (undecided,) = missing_evidence(run)
    assert "per-request timings" in str(undecided.evidence[0].value)


def test_two_runs_reports_stay_apart(tmp_path: Path) -> None:
    a = write_llmd(make_run(400, levels=(1, 4), seed=1, run_id="a"), tmp_path / "a")
    b = write_llmd(make_run(400, levels=(1, 4), seed=1, run_id="b"), tmp_path / "b")
    inputs = load_inputs([*a, *b])
    assert [len(r.config["levels"]) for _, r in inputs] == [2, 2]
    twice = load_inputs([a[0], a[0]])  # the same level twice is not one run
    assert [len(r.config["levels"]) for _, r in twice] == [1, 1]


def test_broken_reports_are_refused_in_one_line(tmp_path: Path) -> None:
    good = write_llmd(make_run(300, levels=(2,), seed=2), tmp_path)[0]
    data = good.read_bytes()
    cut = tmp_path / "cut.json"
    cut.write_bytes(data[: len(data) // 2])
    doc = orjson.loads(data)
    doc["results"]["request_performance"]["aggregate"]["latency"]["time_to_first_token"][
        "units"
    ] = "tokens/s"
    wrong = tmp_path / "wrong.json"
    wrong.write_bytes(orjson.dumps(doc))
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text("version: '0.2.1'\nrun: {uid: x\nresults: [\n")
    for path, words in (
        (cut, "truncated"),
        (wrong, "the package refuses it: results.request_performance"),
        (bad_yaml, "not valid JSON or YAML"),
    ):
        with pytest.raises(ConfigError) as e:
            load_result(path)
        msg = str(e.value)
        assert "\n" not in msg and msg.startswith(str(path)), msg
        assert "read as llm-d benchmark report" in msg and words in msg, msg
    proc = subprocess.run(
        [sys.executable, "-c", "from infersight.cli import main; main()", "diagnose", str(wrong)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "units" in proc.stderr  # the package's own complaint


def test_cli_diagnose_reads_a_runs_reports(tmp_path: Path) -> None:
    paths = write_llmd(make_run(1200, levels=(1, 4, 16), seed=3, error_rate=0.0), tmp_path)
    got = CliRunner().invoke(app, ["diagnose", *map(str, paths), "--json"])
    assert got.exit_code == 0, got.output
    doc = orjson.loads(got.stdout)
    assert doc["recommendation"]["verdict"] == "compute_bound"
    agg_only = write_llmd(make_run(300, levels=(2,), seed=2), tmp_path / "old", version="0.1")
    got = CliRunner().invoke(app, ["diagnose", str(agg_only[0])])
    assert got.exit_code == 0, got.output
    assert "aggregates only" in " ".join(got.output.split())
