"""Admission control: limit, bounded priority queue, drain-rate wait prediction."""

from __future__ import annotations

import asyncio
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infersight.core.errors import DeadlineExceeded, Overloaded
from infersight.gateway.admission import AdmissionController
from infersight.gateway.errors import Shed
from infersight.gateway.limiter import StaticLimit
from support.waiting import until


def far() -> float:
    return time.monotonic() + 60.0


async def test_immediate_then_queue_then_full() -> None:
    reasons: list[str] = []
    a = AdmissionController(StaticLimit(2), queue_size=1, on_reject=reasons.append)
    assert await a.acquire(far()) == 0.0
    assert await a.acquire(far()) == 0.0
    waiter = asyncio.create_task(a.acquire(far()))
    await until(lambda: a.queued == 1, "the third request to queue")
    assert a.inflight == 2
    with pytest.raises(Overloaded) as ei:
        await a.acquire(far())
    assert isinstance(ei.value, Shed) and ei.value.code == "queue_full"
    assert ei.value.retry_after is not None and ei.value.retry_after >= 1
    assert reasons == ["queue_full"]
    a.release(0.05)
    delay = await asyncio.wait_for(waiter, 1.0)
    assert delay > 0.0 and a.inflight == 2 and a.queued == 0


async def test_priority_jumps_the_fifo() -> None:
    a = AdmissionController(StaticLimit(1), queue_size=10)
    await a.acquire(far())
    order: list[str] = []

    async def w(name: str, prio: int) -> None:
        await a.acquire(far(), prio)
        order.append(name)

    tasks = [asyncio.create_task(w("low1", 0)), asyncio.create_task(w("low2", 0))]
    await until(lambda: a.queued == 2, "both low-priority requests to queue")
    tasks.append(asyncio.create_task(w("high", 5)))
    await until(lambda: a.queued == 3, "the high-priority request to queue")
    for i in range(3):
        a.release(0.01)
        await until(lambda i=i: len(order) == i + 1, "the next waiter to be admitted")
    await asyncio.gather(*tasks)
    assert order == ["high", "low1", "low2"]


async def test_deadline_while_queued_raises_and_frees_place() -> None:
    reasons: list[str] = []
    a = AdmissionController(StaticLimit(1), queue_size=5, on_reject=reasons.append)
    await a.acquire(far())
    with pytest.raises(DeadlineExceeded):
        await a.acquire(time.monotonic() + 0.05)
    assert a.queued == 0 and reasons == ["deadline"]
    a.release(0.01)
    assert a.inflight == 0


async def _drained(
    t: list[float], latency: float, whole: float | None = None
) -> AdmissionController:
    """One slot, held, after 10 completions over 10 s of ``t``'s clock (~1/s)."""
    a = AdmissionController(StaticLimit(1), queue_size=100, clock=lambda: t[0])
    await a.acquire(1e9)
    for _ in range(10):
        t[0] += 1.0
        a.release(latency, whole=whole)
        await a.acquire(1e9)
    return a


async def test_predicted_wait_beyond_deadline_is_refused() -> None:
    t = [0.0]
    a = await _drained(t, 1.0)
    rate = a.drain_rate()
    assert rate is not None and 0.8 < rate < 1.2
    assert a.predicted_wait(5) == pytest.approx(5 / rate)
    with pytest.raises(Shed) as ei:
        await a.acquire(t[0] + 0.5)  # position 1 needs ~1 s
    assert ei.value.code == "predicted_wait_exceeds_deadline"
    assert ei.value.retry_after == 1


async def test_the_answer_after_the_wait_counts_against_the_deadline() -> None:
    # 1 completion/s through one slot; answers take 0.6 s to their last byte (streams:
    # their first content after 0.05 s). Position 1 waits ~1 s: a deadline 1.3 s away
    # fits the wait alone, not the wait and the answer.
    t = [0.0]
    a = await _drained(t, 0.05, whole=0.6)
    with pytest.raises(Shed) as ei:
        await a.acquire(t[0] + 1.3)
    assert ei.value.code == "predicted_wait_exceeds_deadline"
    assert "and a typical answer's 0.60s" in str(ei.value)
    t[0] += 1.0
    a.release(0.05, whole=0.6)  # the slot is free again: no wait to predict
    assert await a.acquire(t[0] + 1.3) == 0.0


async def test_cancelled_waiter_leaves_no_trace() -> None:
    a = AdmissionController(StaticLimit(1), queue_size=5)
    await a.acquire(far())
    w = asyncio.create_task(a.acquire(far()))
    await until(lambda: a.queued == 1, "the request to queue")
    w.cancel()
    with pytest.raises(asyncio.CancelledError):
        await w
    assert a.queued == 0
    a.release(0.01)
    assert a.inflight == 0


@settings(max_examples=60, deadline=None)
@given(
    limit=st.integers(1, 4),
    queue=st.integers(0, 4),
    n=st.integers(1, 12),
)
def test_every_request_is_admitted_or_refused_never_lost(limit: int, queue: int, n: int) -> None:
    async def run() -> tuple[int, int, int]:
        a = AdmissionController(StaticLimit(limit), queue_size=queue)
        served = refused = 0
        peak = 0

        async def one() -> None:
            nonlocal served, refused, peak
            try:
                await a.acquire(time.monotonic() + 10)
            except Overloaded:
                refused += 1
                return
            peak = max(peak, a.inflight)
            await asyncio.sleep(0)  # hold the slot while the others run
            a.release(0.001)
            served += 1

        await asyncio.gather(*(one() for _ in range(n)))
        assert a.inflight == 0 and a.queued == 0
        return served, refused, peak

    served, refused, peak = asyncio.run(run())
    assert served + refused == n
    assert peak <= limit
    assert served >= min(n, limit + queue)
