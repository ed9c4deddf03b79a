"""GuideLLM, run for real against the fake server, then read by infersight: its levels
and timings map to ours (docs/design.md section 10), and diagnose reaches the same
verdict and fix from GuideLLM's measurement as from infersight's own bench of the same
server."""

from __future__ import annotations

from pathlib import Path

import pytest

from infersight.core.records import RunResult
from infersight.diagnose import diagnose_run
from infersight.importers import detect, import_file
from infersight_testkit.agreement import advice, disagreements
from support.tool_server import REQUESTS

pytestmark = [pytest.mark.needs("guidellm"), pytest.mark.slow, pytest.mark.timeout(600)]


def test_guidellm_levels_and_timings_map_to_ours(guidellm_measured: tuple[Path, RunResult]) -> None:
    path, _ = guidellm_measured
    renamed = path.with_name("no-hint.dat")  # the format comes from the content
    renamed.write_bytes(path.read_bytes())
    assert detect(renamed.read_bytes()) == "guidellm"
    run = import_file(renamed)
    assert [lv["name"] for lv in run.config["levels"]] == ["c=1", "c=4", "c=8"]
    assert run.config["imported"]["tool_version"].startswith("0.8")
    for name in ("c=1", "c=4", "c=8"):
        recs = [r for r in run.records if r.labels["level"] == name]
        assert len(recs) == REQUESTS and all(r.ok for r in recs)
        assert all(r.output_tokens == 16 and len(r.chunk_times) == 16 for r in recs)
        agg = run.aggregates[name]
        assert agg["target"]["concurrency"] == int(name[2:])
        # GuideLLM's own ITL is our TPOT, request by request: the same numbers.
        own = agg["tool_metrics"]["guidellm.inter_token_latency"]
        assert own["ours"] == "tpot"
        assert own["summary"]["p50"] == pytest.approx(agg["tpot"]["p50"], rel=1e-9)
        assert 0.009 < agg["tpot"]["p50"] < 0.02
        # Its TPOT counts the first token's wait too: larger than ours.
        theirs = agg["tool_metrics"]["guidellm.time_per_output_token"]["summary"]["p50"]
        assert theirs > agg["tpot"]["p50"]
        assert agg["ttft_from_sent"]["p50"] >= 0.05
    # Beyond 4 slots the queue shows in TTFT: c=8 waits about a whole request more.
    assert run.aggregates["c=8"]["ttft"]["p50"] > run.aggregates["c=4"]["ttft"]["p50"] + 0.1


def _levels(*runs: RunResult) -> list[dict[str, tuple[float | None, ...]]]:
    """Per run, each level's throughput and TTFT and TPOT p50s."""
    return [
        {
            name: (
                agg.get("request_throughput"),
                (agg.get("ttft") or {}).get("p50"),
                (agg.get("tpot") or {}).get("p50"),
            )
            for name, agg in run.aggregates.items()
        }
        for run in runs
    ]


def test_guidellm_and_infersight_reach_the_same_verdict_and_fix(
    guidellm_measured: tuple[Path, RunResult],
) -> None:
    """Same verdict, knob and direction, the same fitted model, fix numbers within 1."""
    path, ours = guidellm_measured
    imported = import_file(path)
    theirs, mine = advice(diagnose_run(imported)), advice(diagnose_run(ours))
    # on failure, each side's levels say which measurement moved (a busy machine)
    # a str, not a tuple: pytest shows a message string whole
    why = f"theirs: {theirs.text}\nours: {mine.text}\nlevels: {_levels(imported, ours)}"
    assert disagreements(theirs, mine) == [], why
    assert theirs.verdict == "slot_bound" and theirs.limiter == "slots"
    assert theirs.model_slots == 4 and theirs.number is not None and theirs.number > 4
