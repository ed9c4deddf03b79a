"""Every run says when its figures are not valid (issue 32, docs/design.md section 2).

Real bench runs against fake servers in their own processes, one per fault: chunks
that carry two tokens, usage that disagrees with the stream, latency that drifts
across the level, and a rate the client cannot send (through four connections). Each
fault is flagged on its run, by the check made for it; the clean server's run passes
those checks; and ``report A B`` does not call a metric the faulty run marks invalid.
"""

from __future__ import annotations

import io
from typing import Any

import pytest
from rich.console import Console

from infersight.bench import BenchConfig, run
from infersight.core.records import RunResult
from infersight.report import render_comparison, render_console
from infersight.report.compare.rows import matched_rows
from infersight.report.view import build_views
from infersight.stats.significance import NOT_COMPARED
from infersight_testkit import FakeConfig, FakeOpenAI

pytestmark = pytest.mark.timeout(240)

TTFT, ITL, TOKENS = 0.05, 0.005, 8
_FAULTS = ("tokens", "e2e", "tokens_per_chunk", "stationarity")


def _bench(cfg: FakeConfig, **kw: Any) -> RunResult:
    with FakeOpenAI.subprocess(cfg) as server:
        base: dict[str, Any] = {
            "url": server.base_url,
            "max_tokens": TOKENS,
            "input_tokens": "fixed:8",
            "progress": False,
            "rate": [20.0],
            "duration": 3.0,
            "no_scrape": True,
        }
        return run(BenchConfig(**{**base, **kw}))


def _checks(result: RunResult) -> dict[str, dict[str, Any]]:
    agg = next(iter(result.aggregates.values()))
    return {c["check"]: c for c in agg["validity"]}


@pytest.fixture(scope="module")
def clean() -> RunResult:
    return _bench(FakeConfig(ttft=TTFT, itl=ITL, tokens=TOKENS))


def test_a_clean_server_passes_every_fault_check(clean: RunResult) -> None:
    checks = _checks(clean)
    assert set(checks) >= {*_FAULTS, "rate", "client_limited", "errors", "warmup"}
    for name in (*_FAULTS, "errors"):
        assert checks[name]["ok"], checks[name]
    assert checks["tokens_per_chunk"]["value"] == pytest.approx(1.0)


def test_two_tokens_a_chunk_invalidate_itl(clean: RunResult) -> None:
    bad = _bench(FakeConfig(ttft=TTFT, itl=ITL, tokens=TOKENS, tokens_per_chunk=2))
    c = _checks(bad)["tokens_per_chunk"]
    assert not c["ok"] and c["value"] == pytest.approx(2.0) and "itl" in c["invalidates"]
    out = io.StringIO()
    render_console(bad, Console(file=out, width=200))
    assert "⚠" in out.getvalue() and "tokens_per_chunk" in out.getvalue()
    ((_, _, rows),) = matched_rows(build_views([clean, bad]))
    itl = next(r for r in rows if r.metric == "ITL p99").call(1)
    assert itl is not None and itl.call == NOT_COMPARED and "B marks it invalid" in itl.note
    text = io.StringIO()
    render_comparison([clean, bad], Console(file=text, width=200))
    assert "not compared" in text.getvalue()


def test_usage_that_disagrees_with_the_stream_invalidates_token_rates() -> None:
    bad = _bench(FakeConfig(ttft=TTFT, itl=ITL, tokens=TOKENS, usage_offset=2))
    c = _checks(bad)["tokens"]
    assert not c["ok"] and c["value"] == pytest.approx(0.25)
    assert {"output_token_throughput", "tpot"} <= set(c["invalidates"])


def test_latency_drift_across_the_level_is_flagged() -> None:
    bad = _bench(FakeConfig(ttft=TTFT, itl=ITL, tokens=TOKENS, drift=0.5))
    c = _checks(bad)["stationarity"]
    assert not c["ok"] and c["value"] > 0.1 and "ttft" in c["invalidates"]


def test_a_rate_the_client_cannot_send_is_flagged() -> None:
    # Four connections to a server that takes 50 ms a request: the client can send at
    # most 80 a second, whatever the machine's load, and 400 are asked for (every
    # request gets its answer: the rate, not the server, is what fails).
    bad = _bench(FakeConfig(ttft=TTFT, tokens=1), rate=[400.0], duration=1.0, max_concurrency=4)
    assert all(r.ok for r in bad.records) and len(bad.records) == 400
    c = _checks(bad)["rate"]
    assert not c["ok"] and c["value"] < 0.95 and "e2e" in c["invalidates"]
