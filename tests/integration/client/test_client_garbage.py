"""End to end: whatever bytes a server streams, the client raises only typed errors."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from aiohttp import web
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infersight.client import Client, RetryPolicy, Timeouts
from infersight.core.errors import InfersightError

PIECES = [
    b"data: ",
    b"data:",
    b"\n",
    b"\r\n",
    b"\n\n",
    b"{",
    b"}",
    b"[DONE]",
    b'"choices"',
    b":",
    b"[",
    b"]",
    b'{"choices":[{"delta":{"content":"x"}}]}',
    b"event: error\n",
    b"\xff\xfe",
    b'{"error":{"code":503}}',
    b'{"choices":[{"finish_reason":"stop"}]}',
    b"id: 1\n",
]


class Box:
    body = b""
    step = 7
    pause = 0.0  # between writes: separate reads


@pytest.fixture(scope="module")
def garbage_server() -> Iterator[tuple[asyncio.AbstractEventLoop, Client]]:
    loop = asyncio.new_event_loop()

    async def handler(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        body = Box.body
        step = Box.step
        for i in range(0, len(body), step):  # several writes: events split across reads
            await resp.write(body[i : i + step])
            if Box.pause:
                await asyncio.sleep(Box.pause)
        await resp.write_eof()
        return resp

    async def start() -> tuple[web.AppRunner, Client]:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", handler)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        client = Client(
            f"http://127.0.0.1:{port}", retry=RetryPolicy.none(), timeouts=Timeouts(total=10.0)
        )
        return runner, client

    runner, client = loop.run_until_complete(start())
    yield loop, client
    loop.run_until_complete(client.close())
    loop.run_until_complete(runner.cleanup())
    loop.close()


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(st.one_of(st.sampled_from(PIECES), st.binary(max_size=8)), max_size=25))
def test_any_stream_gives_result_or_typed_error(
    garbage_server: tuple[asyncio.AbstractEventLoop, Client], pieces: list[bytes]
) -> None:
    loop, client = garbage_server
    Box.body = b"".join(pieces)

    async def go() -> Any:
        try:
            return await client.chat([{"role": "user", "content": "x"}])
        except InfersightError as e:
            return e

    out = loop.run_until_complete(go())
    if isinstance(out, InfersightError):
        rec = out.record
        assert rec is not None
        assert not rec.ok and rec.error == out.kind and rec.attempts == 1
    else:
        assert out.record.ok and out.record.end is not None


def test_garbage_after_done_in_the_same_read_does_not_fail_the_answer(
    garbage_server: tuple[asyncio.AbstractEventLoop, Client],
) -> None:
    """docs/design.md s.3: the answer is complete at [DONE]; what follows does not matter,
    whether it arrives in the same read as [DONE] or later."""
    loop, client = garbage_server
    Box.body = (
        b'data: {"choices":[{"delta":{"content":"x"}}]}\n\ndata: [DONE]\n\ndata: garbage{\n\n'
    )
    Box.step = len(Box.body)  # one write
    body = {"messages": [{"role": "user", "content": "x"}], "stream": True}

    async def go() -> list[Any]:
        out: list[Any] = [await client.request("/v1/chat/completions", body)]
        async with client.stream("/v1/chat/completions", body) as s:
            async for _ in s.events():
                pass
        out.append(s.completion())
        async with client.stream("/v1/chat/completions", body) as s:
            async for _ in s.raw_chunks():
                pass
        out.append(s.completion())
        return out

    try:
        done = loop.run_until_complete(go())
    finally:
        Box.step = 7
    assert [(c.record.ok, c.text) for c in done] == [(True, "x")] * 3


def test_garbage_after_done_in_a_later_read_does_not_fail_a_drained_answer(
    garbage_server: tuple[asyncio.AbstractEventLoop, Client],
) -> None:
    """The same when the content came in an earlier read: request() reads the rest
    lazily (payloads decoded one by one), and a bad one after [DONE] is not an error."""
    loop, client = garbage_server
    first = b'data: {"choices":[{"delta":{"content":"x"}}]}\n\n'
    Box.body = first + b"data: [DONE]\n\ndata: garbage{\n\n"
    Box.step, Box.pause = len(first), 0.05
    body = {"messages": [{"role": "user", "content": "x"}], "stream": True}
    try:
        done = loop.run_until_complete(client.request("/v1/chat/completions", body))
    finally:
        Box.step, Box.pause = 7, 0.0
    assert done.record.ok and done.text == "x" and done.record.chunk_tokens == [1]
