"""``report A B`` says whether a difference is real (issue 22, docs/design.md section 2).

Real runs of bench against a fake engine in its own process: two runs of one scenario
must come out "no significant difference" (the noise between them used to be marked
"better"), a known 20% slower first token "worse", and ``bench --repeat`` compares run
against run. The calls are checked on pairs no other process stalled (schedule lag and
TTFT tail within bounds); on a stalled pair the data say nothing about the servers, and
the deterministic cases are in tests/unit/core/test_core_significance.py.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import pytest
from rich.console import Console

from infersight.bench import BenchConfig, run
from infersight.core.records import RunResult
from infersight.report import render_comparison
from infersight.report.compare.rows import matched_rows
from infersight.report.view import build_views
from infersight.stats.significance import BETTER, NOT_COMPARED, RUN_MORE, SAME, WORSE
from infersight_testkit import FakeConfig, FakeOpenAI

pytestmark = pytest.mark.timeout(240)

TTFT, ITL, TOKENS = 0.1, 0.005, 8


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[Any, Any]]:
    """The scenario's server, and one whose first token is 20% slower."""
    with (
        FakeOpenAI.subprocess(FakeConfig(ttft=TTFT, itl=ITL, tokens=TOKENS)) as a,
        FakeOpenAI.subprocess(FakeConfig(ttft=TTFT * 1.2, itl=ITL, tokens=TOKENS)) as b,
    ):
        yield a, b


def _run(url: str, **kw: Any) -> RunResult:
    cfg: dict[str, Any] = {
        "url": url,
        "max_tokens": TOKENS,
        "input_tokens": "fixed:8",
        "progress": False,
        "rate": [20.0],
        "duration": 4.5,
        "no_scrape": True,
    }
    return run(BenchConfig(**{**cfg, **kw}))


@pytest.fixture(scope="module")
def first(servers: tuple[Any, Any]) -> RunResult:
    """One run of the scenario, shared by the A/A and the A/B pair."""
    return _run(servers[0].base_url)


def _calls(a: RunResult, b: RunResult) -> dict[str, Any]:
    ((_, _, rows),) = matched_rows(build_views([a, b]))
    return {r.metric: r.call(1) for r in rows if r.call(1) is not None}


def _clean(run: RunResult) -> bool:
    """The load generator kept its schedule (no other process stalled this one)."""
    agg = next(iter(run.aggregates.values()))
    return bool(
        agg["schedule_lag"]["p99"] < 0.02
        and agg["ttft"]["p99"] < 2 * TTFT
        and all(c["ok"] for c in agg["validity"])
    )


def test_two_runs_of_one_scenario_are_no_significant_difference(
    servers: Any, first: RunResult
) -> None:
    second = _run(servers[0].base_url)
    calls = _calls(first, second)
    out = io.StringIO()
    render_comparison([first, second], Console(file=out, width=140), labels=["A", "A'"])
    text = out.getvalue()
    assert "A' against A" in text
    # ~120 requests a side leave the p99s uncalled (or not compared, on a flagged run).
    assert calls["TTFT p99"].call in (RUN_MORE, NOT_COMPARED)
    if _clean(first) and _clean(second):  # (a pair another process stalled proves nothing)
        # Never better or worse: the noise between two runs used to be marked "better".
        assert not [m for m, c in calls.items() if c.call in (BETTER, WORSE)], calls
        for metric in ("requests/s", "output tok/s", "TTFT p50", "e2e p50"):
            assert calls[metric].call == SAME, calls[metric]
        # Valid runs: the p99 is uncalled for want of requests, and the output says so.
        assert calls["TTFT p99"].call == RUN_MORE and "1,000 requests a side" in text


def test_a_known_20_percent_slower_first_token_is_worse(servers: Any, first: RunResult) -> None:
    a, b = first, _run(servers[1].base_url)
    calls = _calls(a, b)
    ttft = calls["TTFT p50"]
    if ttft.call != NOT_COMPARED:  # (a run flagged invalid is not compared, issue 32)
        assert ttft.basis == "requests" and min(ttft.units) > 50  # bootstrap over requests
    if _clean(a) and _clean(b):  # (a pair another process stalled proves nothing)
        assert ttft.ratio is not None and 1.1 < ttft.ratio < 1.3
        assert ttft.call == WORSE and calls["requests/s"].call == SAME  # the same offered rate


def test_repeats_are_compared_run_against_run(servers: Any) -> None:
    fast, slow = servers
    kw = {"rate": [20.0], "duration": 1.5, "repeat": 3}
    a, b = _run(fast.base_url, **kw), _run(slow.base_url, **kw)
    ttft = _calls(a, b)["TTFT p50"]
    assert ttft.basis == "runs"
    clean = all(
        agg["schedule_lag"]["p99"] < 0.02
        and agg["ttft"]["p99"] < 2.4 * TTFT
        and all(c["ok"] for c in agg["validity"])  # a run flagged invalid is not compared
        for run in (a, b)
        for agg in run.aggregates.values()
    )
    if clean:
        assert ttft.units == (3, 3) and ttft.call == WORSE
