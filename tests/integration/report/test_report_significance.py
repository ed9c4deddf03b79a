"""``report A B`` says whether a difference is real (issue 22, docs/design.md section 2).

Real runs of bench against a fake engine in its own process: two runs of one scenario
must come out "no significant difference" (the noise between them used to be marked
"better"), a known 20% slower first token "worse", and ``bench --repeat`` compares run
against run.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import pytest
from rich.console import Console

from infersight.bench import BenchConfig, run
from infersight.core.records import RunResult
from infersight.core.significance import BETTER, SAME, WORSE
from infersight.report import render_comparison
from infersight.report.compare import matched_rows
from infersight.report.view import build_views
from infersight.testing import FakeConfig, FakeOpenAI

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
        "url": url, "max_tokens": TOKENS, "input_tokens": "fixed:8", "progress": False,
        "rate": [20.0], "duration": 6.0, "no_scrape": True,
    }
    return run(BenchConfig(**{**cfg, **kw}))


def _calls(a: RunResult, b: RunResult) -> dict[str, Any]:
    ((_, _, rows),) = matched_rows(build_views([a, b]))
    return {r.metric: r.call(1) for r in rows if r.call(1) is not None}


def test_two_runs_of_one_scenario_are_no_significant_difference(servers: Any) -> None:
    srv, _ = servers
    first, second = _run(srv.base_url), _run(srv.base_url)
    calls = _calls(first, second)
    for metric in ("requests/s", "output tok/s", "TTFT p50", "e2e p50"):
        assert calls[metric].call == SAME, calls[metric]
    # Nothing is called better or worse: ~120 requests a side leave the p99s uncalled.
    assert not [m for m, c in calls.items() if c.call in (BETTER, WORSE)]
    out = io.StringIO()
    render_comparison([first, second], Console(file=out, width=140), labels=["A", "A'"])
    text = out.getvalue()
    assert "no significant difference" in text and "1,000 requests a side" in text


def test_a_known_20_percent_slower_first_token_is_worse(servers: Any) -> None:
    fast, slow = servers
    calls = _calls(_run(fast.base_url), _run(slow.base_url))
    ttft = calls["TTFT p50"]
    assert ttft.call == WORSE and ttft.ratio is not None and 1.1 < ttft.ratio < 1.3
    assert calls["requests/s"].call == SAME  # the same offered rate, both sustained


def test_repeats_are_compared_run_against_run(servers: Any) -> None:
    fast, slow = servers
    kw = {"rate": [20.0], "duration": 3.0, "repeat": 3}
    calls = _calls(_run(fast.base_url, **kw), _run(slow.base_url, **kw))
    ttft = calls["TTFT p50"]
    assert ttft.basis == "runs" and ttft.units == (3, 3)
    assert ttft.call == WORSE
