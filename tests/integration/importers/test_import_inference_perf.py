"""inference-perf, run for real against the fake server, then read by infersight: its
per-request report becomes request records (each output token's time = a chunk
time), dealt to the stages its stage files name; its summaries alone give the
undecided verdict (docs/design.md section 10)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from infersight.cli._app import app
from infersight.diagnose import diagnose_run
from infersight.importers import detect, import_file
from infersight_testkit.fake.openai import FakeConfig, FakeOpenAI
from infersight_testkit.tool_runs import run_inference_perf

pytestmark = [pytest.mark.needs("inference-perf"), pytest.mark.slow, pytest.mark.timeout(600)]

STAGES = [(8, 1), (16, 4), (24, 8)]  # (requests, concurrency)


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    tmp = tmp_path_factory.mktemp("inference-perf")
    # 0.65 s a request: long beside the client's own time to send the next one, so a
    # client slowed by a busy machine still keeps 8 in flight on the 4 slots
    cfg = FakeConfig(ttft=0.05, itl=0.04, tokens=16, slots=4, metrics_dialect="vllm")
    with FakeOpenAI.subprocess(cfg) as srv:
        yield run_inference_perf(srv.base_url, tmp / "reports", stages=STAGES, tokens=16)


def test_inference_perf_requests_map_to_stages(reports: Path) -> None:
    path = reports / "per_request_lifecycle_metrics.json"
    assert detect(path.read_bytes()) == "inference-perf-requests"
    run = import_file(path)
    assert [lv["name"] for lv in run.config["levels"]] == ["c=1", "c=4", "c=8"]
    for k, (n, conc) in enumerate(STAGES):
        name = f"c={conc}"
        recs = [r for r in run.records if r.labels["level"] == name]
        assert len(recs) == n and all(r.ok and len(r.chunk_times) == 16 for r in recs)
        agg = run.aggregates[name]
        stage = json.loads((reports / f"stage_{k}_lifecycle_metrics.json").read_text())
        lat = stage["successes"]["latency"]
        # The same requests under the same definitions as inference-perf's own summary.
        assert agg["ttft_from_sent"]["p50"] == pytest.approx(
            lat["time_to_first_token"]["median"], rel=0.02
        )
        assert agg["tpot"]["p50"] == pytest.approx(lat["time_per_output_token"]["median"], rel=0.02)
        assert agg["tool_metrics"]["inference_perf.schedule_delay"]["ours"] == "schedule_lag"
    # 8 streams on 4 slots: the wait (up to a whole request's 0.65 s) shows in TTFT.
    assert run.aggregates["c=8"]["ttft"]["p50"] > run.aggregates["c=1"]["ttft"]["p50"] + 0.2
    found = diagnose_run(run)
    assert found.curve is not None and len(found.curve.points) == 3
    assert {v.level for v in found.verdicts} >= {"c=1", "c=4", "c=8"}
    assert "undecided" not in {v.id for v in found.verdicts}


def test_inference_perf_summary_alone_is_undecided(reports: Path) -> None:
    res = CliRunner().invoke(
        app, ["diagnose", str(reports / "stage_2_lifecycle_metrics.json"), "--json"]
    )
    assert res.exit_code == 0, res.output
    [v] = json.loads(res.stdout)["verdicts"]
    assert v["id"] == "undecided" and v["level"] == "c=8"
    assert "per_request" in v["fixes"][0]
