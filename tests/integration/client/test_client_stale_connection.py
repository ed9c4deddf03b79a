"""Pooled keep-alive connections the server closes, and the resend rule (docs/design.md s.3).

A request is written again, without an attempt, only when it provably never reached
the server (the pooled connection was closed before any byte of it was written), and
each such resend is counted. Once the server may have read it, a second send is a
retry under the policy or nothing. A server that closes connections after streamed
answers (llama.cpp) is never given a pooled connection it is about to close.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from keepalive_server import KeepAliveServer

from infersight.client import Client, RetryPolicy
from infersight.core.errors import ResetError

MSG = [{"role": "user", "content": "hi"}]


async def _users(c: Client, users: int, each: int) -> list[Any]:
    """Closed loop: each user sends its next request as soon as the last one ended."""

    async def user() -> list[Any]:
        out: list[Any] = []
        for _ in range(each):
            try:
                out.append(await c.chat(MSG, max_tokens=3))
            except ResetError as e:
                out.append(e)
        return out

    runs = await asyncio.gather(*(user() for _ in range(users)))
    return [x for run in runs for x in run]


async def test_llamacpp_never_gets_a_request_on_a_connection_it_is_closing() -> None:
    # llama.cpp closes 50 ms after each streamed answer and never reads in between.
    # Reusing the pooled connection at once would write the next request into it
    # (lost, and not provably so: no resend allowed). The client knows llama.cpp by
    # its Server header and keeps such connections out of the pool.
    async with (
        KeepAliveServer(server_header="llama.cpp", close_after_stream=0.05) as srv,
        Client(srv.base_url, retry=RetryPolicy.none()) as c,
    ):
        done = await _users(c, users=3, each=6)
        assert c.closes_after_stream is not None and "llama.cpp" in c.closes_after_stream
    assert not [d for d in done if isinstance(d, ResetError)]
    recs = [d.record for d in done]
    assert len(recs) == 18 and all(r.ok and r.attempts == 1 for r in recs)
    assert sum(r.resends for r in recs) == 0
    assert srv.doomed_writes == 0 and srv.requests_read == 18


async def test_an_unknown_server_that_closes_after_streams_is_learnt() -> None:
    # Same habit, unknown server: the first reuse is written into the doomed
    # connection. The server may have read it, so it is a ResetError (no retries
    # here), not a resend; the client learns the habit and the rest are safe.
    async with (
        KeepAliveServer(close_after_stream=0.2) as srv,
        Client(srv.base_url, retry=RetryPolicy.none()) as c,
    ):
        done = await _users(c, users=1, each=6)
        learnt = c.closes_after_stream
    assert learnt is not None and "ms after a streamed answer" in learnt
    assert [type(d) is ResetError for d in done] == [False, True, False, False, False, False]
    rec = done[1].record
    assert rec.attempts == 1 and rec.resends == 0 and rec.headers is None
    assert all(d.record.ok for i, d in enumerate(done) if i != 1)
    assert srv.doomed_writes == 1 and srv.requests_read == 5


async def test_a_request_the_server_read_is_never_sent_twice() -> None:
    # The second request reaches the server on the pooled connection and the server
    # closes without answering. Not provably unsent: no resend.
    async with (
        KeepAliveServer(read_then_close=2) as srv,
        Client(srv.base_url, retry=RetryPolicy.none()) as c,
    ):
        first = await c.chat(MSG, stream=False)
        with pytest.raises(ResetError) as info:
            await c.chat(MSG, stream=False)
    rec = info.value.record
    assert first.record.ok and rec is not None
    assert rec.attempts == 1 and rec.resends == 0 and rec.error == "ResetError"
    assert srv.requests_read == 2


async def test_the_retry_policy_may_send_it_again_as_an_attempt() -> None:
    policy = RetryPolicy(max_attempts=2, base_delay=0.001, max_delay=0.01, budget=None)
    async with (
        KeepAliveServer(read_then_close=2) as srv,
        Client(srv.base_url, retry=policy) as c,
    ):
        await c.chat(MSG, stream=False)
        done = await c.chat(MSG, stream=False)
    assert done.record.ok and done.record.attempts == 2 and done.record.resends == 0
    assert srv.requests_read == 3


async def test_a_pooled_connection_closed_before_writing_is_resent_and_counted() -> None:
    async with (
        KeepAliveServer() as srv,
        Client(srv.base_url, retry=RetryPolicy.none()) as c,
    ):
        first = await c.chat(MSG, stream=False)
        assert srv.connections == 1 and first.record.end is not None
        # The server ends the idle connection and the request starts at once:
        # the event loop has not seen the FIN yet, only the kernel has.
        srv.shut_idle_connections()
        done = await c.chat(MSG, stream=False)
        learnt = c.closes_after_stream
    rec = done.record
    assert first.record.ok and rec.ok and rec.attempts == 1 and rec.resends == 1
    assert rec.sent is not None and rec.sent >= first.record.end
    # The resent request went out once, on a new connection.
    assert srv.requests_read == 2 and srv.connections == 2
    # A close after a non-streamed answer teaches nothing about streams.
    assert learnt is None
