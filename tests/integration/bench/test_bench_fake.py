"""The load generator against a fake OpenAI server with known timing (own process)."""

from __future__ import annotations

import contextlib
import os
import statistics
from collections.abc import Iterator
from typing import Any

import pytest

from infersight.bench import BenchConfig, run
from infersight.bench.schedule import open_loop_schedule
from infersight.core.records import RequestRecord
from infersight.stats.aggregate import aggregate
from infersight_testkit.fake.openai import FakeConfig, FakeOpenAI
from infersight_testkit.realtime import realtime

pytestmark = pytest.mark.timeout(120)


@contextlib.contextmanager
def _priority() -> Iterator[None]:
    raised = realtime(0)
    try:
        yield
    finally:
        if raised:
            os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))


@pytest.fixture(scope="module")
def fake() -> Iterator[Any]:
    """TTFT 50 ms, then a token every 10 ms, 20 tokens."""
    with FakeOpenAI.subprocess(FakeConfig(ttft=0.05, itl=0.01, tokens=20)) as srv:
        realtime(srv.pid)
        yield srv


def _cfg(url: str, **kw: Any) -> BenchConfig:
    base: dict[str, Any] = {
        "url": url,
        "max_tokens": 20,
        "input_tokens": "fixed:16",
        "diagnose": False,
        "progress": False,
        "warmup": "0",
        "cooldown": "0",
    }
    return BenchConfig(**{**base, **kw})


def test_accuracy_ttft_tpot_itl(fake: Any) -> None:
    # Noise from other processes only ever adds delay, so the best of up to three
    # runs shows the load generator's own accuracy.
    seen = []
    for _ in range(3):
        with _priority():
            result = run(_cfg(fake.base_url, concurrency=[2], requests=60))
        a = result.aggregates["c=2"]
        assert a["requests"]["ok"] == 60
        assert a["ttft"]["count"] == 60 and a["itl"]["count"] == 60 * 19
        assert a["tokens"]["output"] == 60 * 20 and a["tokens"]["estimated_requests"] == 0
        # /tokenize was offered, so prompt lengths are exact and said to be.
        assert result.config["workload"]["lengths_exact"] is True
        errs = (
            abs(a["ttft"]["p50"] - 0.050) / 0.003,
            abs(a["tpot"]["p50"] - 0.010) / 0.001,
            abs(a["itl"]["p50"] - 0.010) / 0.001,
            abs(a["itl_per_request"]["p50"] - 0.010) / 0.001,
        )
        seen.append(errs)
        if max(errs) < 1.0:
            return
    pytest.fail(f"TTFT/TPOT/ITL p50 off by more than 3/1/1/1 ms (in units of the limit): {seen}")


def test_over_capacity_ttft_from_intended_send_grows(fake: Any) -> None:
    # Two connections at ~0.24 s per request: capacity ~8 req/s; offer 20 req/s.
    with _priority():
        result = run(_cfg(fake.base_url, rate=[20.0], requests=40, max_concurrency=2))
    recs = sorted(result.records, key=lambda r: r.scheduled)
    assert all(r.ok for r in recs)
    first, last = recs[:10], recs[-10:]

    def med(rs: list[RequestRecord], attr: str) -> float:
        return statistics.median(getattr(r, attr) for r in rs)

    assert med(last, "ttft") > med(first, "ttft") + 1.0  # the queue grew in the client
    assert abs(med(last, "ttft_from_sent") - med(first, "ttft_from_sent")) < 0.03
    assert med(last, "ttft_from_sent") < 0.1
    a = result.aggregates["r=20"]
    assert a["client_limited"]["flag"] and result.client_limited
    assert any("schedule lag" in x for x in result.client_limited_reasons)


def test_workers_split_the_schedule_and_merge_exactly(fake: Any) -> None:
    result = run(_cfg(fake.base_url, concurrency=[4], requests=24, workers=2))
    recs = result.records
    assert len(recs) == 24 and len({r.request_id for r in recs}) == 24
    assert {r.labels["worker"] for r in recs} == {"0", "1"}
    a = result.aggregates["c=4"]
    assert a["requests"]["ok"] == 24
    # The fake answers after 50 ms; worker processes on a busy 2-core box add some.
    assert 0.048 <= a["ttft"]["p50"] < 0.09
    # The stored aggregate is exactly what aggregating the merged records gives.
    again = aggregate(
        list(reversed(recs)),
        window=_cfg("http://x").window(),
        target_concurrency=4,
        loadgen_cpu_percent=a["loadgen_cpu_percent"],
        contention=result.environment.get("cpu_contention"),
    )
    assert again == a


def test_open_loop_in_workers_keeps_every_send_time(fake: Any) -> None:
    result = run(_cfg(fake.base_url, rate=[10.0], requests=12, workers=2, arrival="poisson"))
    recs = result.records
    assert len(recs) == 12 and all(r.ok for r in recs)
    assert {r.labels["worker"] for r in recs} == {"0", "1"}
    # Each request, whichever worker sent it, kept its own planned send time: the
    # same seed gives the same schedule, and request "r=10-i" is its i-th slot.
    offsets = open_loop_schedule(10.0, arrival="poisson", requests=12, seed=0)
    by_index = {int(r.request_id.rsplit("-", 1)[1]): r for r in recs}
    assert sorted(by_index) == list(range(12))
    t0 = by_index[0].scheduled - float(offsets[0])
    for i, r in by_index.items():
        assert r.scheduled - t0 == pytest.approx(float(offsets[i]), abs=1e-6), i
    # Every worker starts at the same instant: no systematic offset in send times.
    lags = [r.schedule_lag for r in recs]
    assert None not in lags and statistics.median(lags) < 0.05


def test_sweep_auto_and_find_max(fake: Any) -> None:
    sweep = run(_cfg(fake.base_url, sweep="auto", sweep_levels=2, requests=12))
    assert list(sweep.aggregates)[:2] == ["c=1", "throughput"]
    assert len(sweep.aggregates) == 4
    fm = run(
        _cfg(
            fake.base_url,
            find_max=True,
            slo="ttft_p99<150ms",
            requests=12,
            find_max_steps=2,
            max_concurrency=4,
        )
    )
    info = fm.config["find_max"]
    assert len(info["curve"]) == 3 and info["capacity"] > 0
    assert all(lv["goodput"] is not None for lv in fm.aggregates.values())
    # TTFT is 50 ms at low load, so some rate meets ttft_p99<150ms: the answer is the
    # highest rate of the curve that met it.
    met = [c for c in info["curve"] if c["slo_met"] and c["target_rate"]]
    assert met, info["curve"]
    assert info["max_rate"] == max(c["target_rate"] for c in met)


def test_cost_from_flat_prices(fake: Any) -> None:
    result = run(_cfg(fake.base_url, concurrency=[2], requests=6, price_in=1.0, price_out=2.0))
    cost = result.cost
    assert cost is not None
    recs = result.records
    expected = sum((r.prompt_tokens or 0) * 1.0 + r.output_tokens * 2.0 for r in recs) / 1e6
    assert cost["usd"] == pytest.approx(expected)
    assert cost["usd_per_million_output_tokens"] == pytest.approx(
        expected / sum(r.output_tokens for r in recs) * 1e6
    )
    assert result.aggregates["c=2"]["cost"]["projected_usd_per_day"] > 0
