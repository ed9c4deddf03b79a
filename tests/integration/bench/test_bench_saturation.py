"""Truth at saturation (issue 10): bench against a fake engine with N slots and a fixed
service time, in its own process, compared with what the server itself measured.

The server records every request's true wait for a slot; its capacity is slots /
service time. These tests fail with windows chosen by finish time (the longest waits
are dropped, TTFT p99 halves and the diagnosis says "healthy") and with one-sample
statistics for small closed-loop runs.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from rich.console import Console

from infersight.bench import BenchConfig
from infersight.core.records import RunResult
from infersight.entrypoints.bench import bench_and_diagnose
from infersight.report import render_console
from infersight_testkit import FakeConfig, FakeOpenAI

pytestmark = pytest.mark.timeout(180)

SLOTS, SERVICE = 2, 0.12  # capacity 16.7 req/s


@pytest.fixture(scope="module")
def engine() -> Iterator[Any]:
    cfg = FakeConfig(ttft=SERVICE, tokens=1, slots=SLOTS, metrics_dialect="vllm")
    with FakeOpenAI.subprocess(cfg) as srv:
        yield srv


def _bench(url: str, **kw: Any) -> RunResult:
    base: dict[str, Any] = {
        "url": url,
        "max_tokens": 1,
        "input_tokens": "fixed:8",
        "progress": False,
    }
    return bench_and_diagnose(BenchConfig(**{**base, **kw}))


def _truth(srv: Any, result: RunResult) -> np.ndarray:
    """[arrival, start, end] of the level's requests, as the server saw them."""
    t0 = min(r.scheduled for r in result.records)
    lines = np.array(srv.stats()["timelines"])
    return lines[lines[:, 0] >= t0]


def test_overload_reports_the_true_tail_and_the_capacity(engine: Any) -> None:
    # Issue 10, item 1, at half the scale: offered 33 req/s, twice the capacity.
    engine.reset()
    result = _bench(engine.base_url, rate=[33.0], duration=6.0)
    (name,) = result.aggregates
    a = result.aggregates[name]
    truth = _truth(engine, result)
    assert len(truth) == len(result.records) == a["requests"]["total"]
    true_wait_p99 = float(np.percentile(truth[:, 1] - truth[:, 0], 99))
    true_ttft_p99 = float(np.percentile(truth[:, 1] - truth[:, 0] + SERVICE, 99))
    assert true_wait_p99 > 4.0  # the queue really grew
    # Every request sent in the window counts, the longest waits included.
    assert a["window"]["steady"] and a["requests"]["in_window"] >= 0.9 * a["requests"]["total"]
    assert a["ttft"]["p99"] == pytest.approx(true_ttft_p99, rel=0.10)
    assert a["ttft"]["p99"] == pytest.approx(true_wait_p99, rel=0.10)
    sus = a["sustainability"]
    assert sus["judged"] and sus["sustainable"] is False
    capacity = SLOTS / SERVICE
    assert sus["capacity_estimate"] == pytest.approx(capacity, rel=0.10)
    assert sus["offered_rate"] == pytest.approx(33.0, rel=0.10)
    ids = [v.id for v in result.diagnosis if v.level == name]
    assert "overloaded" in ids and "healthy" not in ids
    buf = io.StringIO()
    render_console(result, Console(file=buf, width=220))
    text = buf.getvalue()
    assert "UNSUSTAINABLE" in text and f"{name} is unsustainable" in text
    assert "in stats" in text  # sent and counted differ, and the table says so


def test_small_closed_loop_uses_every_request(engine: Any) -> None:
    # Issue 10, item 2: c=8 with 8 requests; two rounds through 2 slots... four rounds.
    engine.reset()
    result = _bench(engine.base_url, concurrency=[8], requests=8)
    a = result.aggregates["c=8"]
    truth = _truth(engine, result)
    assert len(truth) == 8
    true_tput = 8 / (truth[:, 2].max() - truth[:, 0].min())
    assert a["request_throughput"] == pytest.approx(true_tput, rel=0.20)
    assert a["ttft"]["count"] == 8 and a["requests"]["in_window"] == 8
    # Eight samples, not one: the tail and the median are the server's own. Through 2
    # slots the first tokens come in four rounds, so the slowest is about 1.6 times the
    # median (a statistic of one sample would make them equal).
    waited = truth[:, 2] - truth[:, 0]  # one token: its first is its last
    assert a["ttft"]["p50"] == pytest.approx(np.median(waited), rel=0.2)
    assert a["ttft"]["p99"] == pytest.approx(np.percentile(waited, 99), rel=0.2)
    assert a["ttft"]["p99"] > 1.2 * a["ttft"]["p50"]
    assert a["window"]["steady"] is False and "no steady state" in a["window"]["note"]


def test_a_server_on_the_client_cores_is_named(engine: Any) -> None:
    # The fake listens on loopback from its own process: the run knows it shares cores.
    engine.reset()
    result = _bench(engine.base_url, rate=[5.0], requests=10)
    contention = result.environment.get("cpu_contention") or ""
    assert f"pid {engine.pid}" in contention and "share" in contention
    a = result.aggregates["r=5"]
    assert a["sustainability"]["judged"] and a["sustainability"]["sustainable"] is True
    assert "overloaded" not in [v.id for v in result.diagnosis]
    for reason in a["client_limited"]["reasons"]:
        assert contention in reason  # a slipped schedule is blamed on the contention
