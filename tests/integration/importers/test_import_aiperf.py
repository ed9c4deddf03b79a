"""AIPerf, run for real against the fake server, then read by infersight: its
per-request export becomes request records (credit issued = scheduled, request start =
sent, TTFT then each inter-chunk gap = the chunk times) that diagnose judges like a
bench run; its aggregate JSON alone gives the undecided verdict that names what is
missing; ``report`` compares the two (docs/design.md section 10)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from infersight.cli._app import app
from infersight.diagnose import diagnose_run
from infersight.importers import detect, import_file, missing_evidence
from infersight_testkit.fake.openai import FakeConfig, FakeOpenAI
from infersight_testkit.tool_runs import run_aiperf

pytestmark = [pytest.mark.needs("aiperf"), pytest.mark.slow, pytest.mark.timeout(600)]

REQUESTS = 24
#: Verdicts the rules give from request records alone (no engine telemetry here).
FROM_REQUESTS = {
    "slot_bound",
    "capacity",
    "healthy",
    "client_limited",
    "overloaded",
    "compute_bound",
    "error_driven",
}


@pytest.fixture(scope="module")
def exports(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """AIPerf at 8 streams against 4 slots (50 ms to the first token, 10 ms a token)."""
    tmp = tmp_path_factory.mktemp("aiperf")
    cfg = FakeConfig(ttft=0.05, itl=0.01, tokens=16, slots=4, metrics_dialect="vllm")
    with FakeOpenAI.subprocess(cfg) as srv:
        yield run_aiperf(srv.base_url, tmp / "artifacts", concurrency=8, requests=REQUESTS)


def test_aiperf_records_map_to_ours(exports: Path) -> None:
    path = exports / "profile_export.jsonl"
    assert detect(path.read_bytes()) == "aiperf-records"
    run = import_file(path)
    assert run.config["imported"]["tool_version"].startswith("0.13")
    # The target comes from the aggregate JSON beside the records.
    assert [lv["name"] for lv in run.config["levels"]] == ["c=8"]
    assert len(run.records) == REQUESTS and all(r.ok for r in run.records)
    raw = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    by_id = {d["metadata"]["x_request_id"]: d for d in raw}
    for r in run.records:
        meta = by_id[r.request_id]["metadata"]
        assert r.scheduled == pytest.approx(meta["credit_issued_ns"] / 1e9, abs=1e-6)
        assert r.sent == pytest.approx(meta["request_start_ns"] / 1e9, abs=1e-6)
        assert r.output_tokens == 16 and len(r.chunk_times) == 16
    agg = run.aggregates["c=8"]
    theirs = json.loads((exports / "profile_export_aiperf.json").read_text())
    # Same requests, same definition: TTFT from the send agrees with AIPerf's own.
    assert agg["ttft_from_sent"]["p50"] == pytest.approx(
        theirs["time_to_first_token"]["p50"] / 1000, rel=0.02
    )
    assert 0.009 < agg["tpot"]["p50"] < 0.02
    # 8 streams on 4 slots: half of them wait about a whole request (0.2 s).
    assert agg["ttft_from_sent"]["p50"] > 0.15
    found = diagnose_run(run)
    ids = {v.id for v in found.verdicts}
    assert ids and ids <= FROM_REQUESTS, ids
    if "client_limited" in ids:  # AIPerf's own dispatch lag, on a busy host
        assert agg["schedule_lag"]["p99"] > 0.005


def test_aiperf_aggregates_only_say_what_is_missing(exports: Path, tmp_path: Path) -> None:
    summary = exports / "profile_export_aiperf.json"
    run = import_file(summary)
    assert not run.records and run.aggregates["c=8"]["requests"]["ok"] == REQUESTS
    [v] = missing_evidence(run)
    assert v.id == "undecided" and "per-request timings" in str(v.evidence[0].value)
    res = CliRunner().invoke(app, ["diagnose", str(summary), "--json"])
    assert res.exit_code == 0, res.output
    assert [x["id"] for x in json.loads(res.stdout)["verdicts"]] == ["undecided"]
    # report shows both and compares them: the records against the aggregates
    out = tmp_path / "r.html"
    res = CliRunner().invoke(
        app,
        [
            "report",
            str(exports / "profile_export.jsonl"),
            str(summary),
            "-l",
            "records",
            "-l",
            "summary",
            "-o",
            str(out),
            "-m",
            str(tmp_path / "r.md"),
        ],
    )
    assert res.exit_code == 0, res.output
    md = (tmp_path / "r.md").read_text()
    assert "records" in md and "summary" in md
    assert out.stat().st_size > 1000
