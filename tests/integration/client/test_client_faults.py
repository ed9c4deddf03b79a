"""Retries, timeouts and typed errors against the fault-injecting FakeOpenAI server.

The server runs on 127.0.0.1 in the test's own event loop; each test scripts the
behaviour of the attempts it sends and asserts attempts, waits and error types.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from infersight.client import Client, RetryBudget, RetryPolicy, Timeouts
from infersight.core import errors as E
from infersight_testkit import FakeConfig, FakeOpenAI
from support.ports import closed_port
from support.waiting import until

MSG = [{"role": "user", "content": "hello world"}]
FAST = RetryPolicy(max_attempts=3, base_delay=0.01, max_delay=0.05)


@asynccontextmanager
async def served(
    cfg: FakeConfig | None = None, **client_kw: Any
) -> AsyncIterator[tuple[FakeOpenAI, Client]]:
    client_kw.setdefault("retry", RetryPolicy(max_attempts=3, base_delay=0.01, max_delay=0.05))
    async with (
        FakeOpenAI(cfg or FakeConfig(tokens=8)).running() as srv,
        Client(srv.base_url, **client_kw) as c,
    ):
        yield srv, c


async def fail(c: Client, **kw: Any) -> E.InfersightError:
    with pytest.raises(E.InfersightError) as ei:
        await c.chat(MSG, **{"max_tokens": 8, **kw})
    return ei.value


class Waits:
    """A retry policy's sleep that notes each wait and returns at once: the test reads
    the waits the client chose, without spending them."""

    def __init__(self) -> None:
        self.seconds: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.seconds.append(seconds)


async def left_while_held(srv: FakeOpenAI) -> None:
    """The server saw the client hang up while it still held the answer back (its
    handler was cancelled): the client gave up, it did not wait for the server."""
    await until(lambda: srv.stats["client_gone"] == 1, "the server to see the client leave")


async def test_429_retry_after_one_retry_after_at_least_1s() -> None:
    waits = Waits()
    policy = RetryPolicy(max_attempts=3, base_delay=0.01, max_delay=0.05, sleep=waits)
    cfg = FakeConfig(script=[{"status": 429, "retry_after": "1"}])
    async with served(cfg, retry=policy) as (srv, c):
        done = await c.chat(MSG, max_tokens=8)
    assert done.record.ok and done.record.attempts == 2 and srv.stats["requests"] == 2
    # the one retry waited the server's Retry-After (not the 10-50 ms backoff)
    assert waits.seconds == [pytest.approx(1.0, abs=0.01)]


async def test_retry_after_ms_preferred() -> None:
    waits = Waits()
    policy = RetryPolicy(max_attempts=3, sleep=waits)
    cfg = FakeConfig(script=[{"status": 503, "retry_after": "30", "retry_after_ms": 300}])
    async with served(cfg, retry=policy) as (srv, c):
        done = await c.chat(MSG, max_tokens=8)
    assert done.record.attempts == 2 and srv.stats["requests"] == 2
    assert waits.seconds == [pytest.approx(0.3, abs=0.01)]  # the 300 ms, not the 30 s


async def test_503_twice_then_ok_on_third_attempt() -> None:
    async with served(FakeConfig(script=["503", "503"])) as (srv, c):
        done = await c.chat(MSG, max_tokens=8)
    assert done.record.ok and done.record.attempts == 3 and srv.stats["requests"] == 3
    assert done.record.status == 200 and done.text == "tok " * 8


async def test_503_exhausts_attempts() -> None:
    async with served(FakeConfig(script=["503"] * 5)) as (srv, c):
        err = await fail(c)
    assert isinstance(err, E.Overloaded) and err.status == 503
    rec = err.record
    assert rec is not None
    assert rec.attempts == 3 and rec.error == "Overloaded" and not rec.ok
    assert srv.stats["requests"] == 3


async def test_connection_refused_is_connect_error() -> None:
    with closed_port() as port:
        async with Client(f"http://127.0.0.1:{port}", retry=FAST) as c:
            err = await fail(c)
    assert isinstance(err, E.ConnectError)
    rec = err.record
    assert rec is not None
    assert rec.attempts == 3 and rec.sent is None and rec.error == "ConnectError"


async def test_reset_before_headers_is_retried() -> None:
    async with served(FakeConfig(script=["reset"])) as (srv, c):
        done = await c.chat(MSG, max_tokens=8)
    assert done.record.ok and done.record.attempts == 2 and srv.stats["requests"] == 2


async def test_first_byte_after_30s_with_1s_first_token_timeout() -> None:
    cfg = FakeConfig(script=[{"delay": 30.0}])
    async with served(cfg, timeouts=Timeouts(first_token=1.0)) as (srv, c):
        err = await fail(c)
        await left_while_held(srv)  # the server still held its 30 s delay
    rec = err.record
    # the 1 s first-token limit ended the wait (not the deadline, not the server)
    assert isinstance(err, E.FirstTokenTimeout) and rec is not None
    assert "first-token limit (1 s)" in str(err)
    assert rec.headers is None and not rec.chunk_times  # gave up before the first byte
    assert rec.attempts == 1 and srv.stats["requests"] == 1


async def test_first_token_timeout_after_headers() -> None:
    async with served(FakeConfig(ttft=30.0), timeouts=Timeouts(first_token=0.5)) as (srv, c):
        err = await fail(c)
        await left_while_held(srv)  # the server still held its first token (30 s)
    rec = err.record
    assert isinstance(err, E.FirstTokenTimeout) and rec is not None
    assert rec.headers is not None and not rec.chunk_times  # headers came, no token did


async def test_cut_after_5_chunks_is_truncated_without_retry() -> None:
    async with served(FakeConfig(tokens=20, script=["cut:5"])) as (srv, c):
        err = await fail(c, ignore_eos=True, max_tokens=20)
    assert isinstance(err, E.TruncatedStream)
    rec = err.record
    assert rec is not None
    assert rec.attempts == 1 and len(rec.chunk_times) == 5 and srv.stats["requests"] == 1
    assert rec.error == "TruncatedStream" and not rec.ok


async def test_reset_after_content_is_not_retried() -> None:
    async with served(FakeConfig(tokens=20, script=["reset:5"])) as (srv, c):
        err = await fail(c, max_tokens=20)
    assert isinstance(err, E.ResetError) and not err.before_content
    assert err.record.attempts == 1 and srv.stats["requests"] == 1  # type: ignore[union-attr]


async def test_401_auth_error_not_retried_and_key_not_shown() -> None:
    key = "wrong-key-7f3a9c"
    async with served(FakeConfig(api_key="right-key-123"), api_key=key) as (srv, c):
        err = await fail(c)
    assert isinstance(err, E.AuthError) and err.status == 401
    assert err.record.attempts == 1 and srv.stats["requests"] == 1  # type: ignore[union-attr]
    assert key not in str(err) and key not in repr(c) and "rejected" in str(err)
    async with served(FakeConfig(api_key="right-key-123")) as (_, c2):
        err2 = await fail(c2)
    assert "no API key was sent" in str(err2)


async def test_right_key_passes() -> None:
    async with served(FakeConfig(api_key="right-key-123"), api_key="right-key-123") as (_, c):
        assert (await c.chat(MSG, max_tokens=2)).record.ok


async def test_retry_after_beyond_deadline_fails_fast() -> None:
    cfg = FakeConfig(script=[{"status": 429, "retry_after": "30"}])
    waits = Waits()
    policy = RetryPolicy(sleep=waits)
    async with served(cfg, timeouts=Timeouts(total=20.0), retry=policy) as (srv, c):
        err = await fail(c)
    rec = err.record
    assert isinstance(err, E.RateLimited) and err.retry_after == 30.0 and rec is not None
    assert rec.attempts == 1 and srv.stats["requests"] == 1  # no second attempt
    # No sleep between the 429 and the error: not toward Retry-After (30 s), not toward
    # the deadline (20 s).
    assert waits.seconds == []


async def test_retry_budget_limits_a_storm() -> None:
    n = 40
    policy = RetryPolicy(
        max_attempts=5,
        base_delay=0.001,
        max_delay=0.01,
        budget=RetryBudget(ratio=0.1, window=10.0, min_retries=3),
    )
    async with served(retry=policy) as (srv, c):
        results = await asyncio.gather(
            *(c.chat(MSG, max_tokens=2, headers={"X-Fake-Behavior": "503"}) for _ in range(n)),
            return_exceptions=True,
        )
    assert all(isinstance(r, E.Overloaded) for r in results)
    # without the budget the storm would send n * 5 = 200 attempts
    assert n <= srv.stats["requests"] <= n + 3 + 0.1 * n
    assert policy.budget is not None and policy.budget.refused > 0


async def test_idle_timeout() -> None:
    cfg = FakeConfig(tokens=10, itl=0.01, script=[{"stall": 30.0, "stall_at": 3}])
    async with served(cfg, timeouts=Timeouts(idle=0.5)) as (srv, c):
        err = await fail(c, max_tokens=10)
        await left_while_held(srv)  # it left during the 30 s stall
    rec = err.record
    # the idle limit, not the deadline, ended it: after the 3 chunks, inside the stall
    assert isinstance(err, E.IdleTimeout) and rec is not None
    assert len(rec.chunk_times) == 3 and rec.attempts == 1
    assert rec.end is not None and rec.end > rec.chunk_times[-1]


async def test_deadline_exceeded_on_hang() -> None:
    async with served(FakeConfig(script=["hang"]), timeouts=Timeouts(total=1.0)) as (srv, c):
        err = await fail(c)
        await left_while_held(srv)  # the hang lasts until the server closes
    # the deadline ended it (its own error), while the server still hung
    assert isinstance(err, E.DeadlineExceeded) and err.record is not None
    assert err.record.headers is None and err.record.attempts == 1


async def test_absolute_deadline_spans_retries() -> None:
    # Every 503 asks for 0.4 s: attempts at 0, 0.4 and 0.8 s fit in the 1 s deadline,
    # a fourth would not. A deadline per attempt would let all 10 through (3.6 s).
    cfg = FakeConfig(script=[{"status": 503, "retry_after_ms": 400}] * 10)
    async with served(cfg, retry=RetryPolicy(max_attempts=10, budget=None)) as (srv, c):
        deadline = time.monotonic() + 1.0
        with pytest.raises(E.InfersightError) as ei:
            await c.chat(MSG, max_tokens=2, deadline=deadline)
    rec = ei.value.record
    arrivals = srv.stats["arrivals"]
    assert rec is not None and rec.attempts == len(arrivals) <= 3, arrivals
    assert all(a < deadline for a in arrivals)  # no attempt started past the deadline


async def test_malformed_sse() -> None:
    async with served(FakeConfig(script=["malformed:2"])) as (srv, c):
        err = await fail(c)
    assert isinstance(err, E.MalformedStream)
    assert err.record.attempts == 1 and srv.stats["requests"] == 1  # type: ignore[union-attr]


async def test_error_event_mid_stream() -> None:
    async with served(FakeConfig(script=[{"error_after": 3, "status": 500}])) as (_, c):
        err = await fail(c)
    assert isinstance(err, E.ServerError) and "fake mid-stream failure" in str(err)
    assert len(err.record.chunk_times) == 3  # type: ignore[union-attr]


async def test_400_bad_request_not_retried() -> None:
    async with served(FakeConfig(script=[{"status": 400, "message": "max_tokens too big"}])) as (
        srv,
        c,
    ):
        err = await fail(c)
    assert isinstance(err, E.BadRequest) and "max_tokens too big" in str(err)
    assert srv.stats["requests"] == 1


async def test_cancellation_marks_record() -> None:
    from infersight.core.records import RequestRecord

    rec = RequestRecord(request_id="cancel-me", scheduled=time.monotonic())
    async with served(FakeConfig(tokens=50, itl=0.05)) as (_, c):
        task = asyncio.create_task(c.chat(MSG, max_tokens=50, record=rec))
        await until(lambda: rec.chunk_times, "the first chunks")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert rec.cancelled and rec.error == "Cancelled" and not rec.ok
    assert rec.end is not None and 0 < len(rec.chunk_times) < 50
