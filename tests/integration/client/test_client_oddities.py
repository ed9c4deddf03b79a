"""Odd but real server behaviours, served by small aiohttp apps on 127.0.0.1."""

from __future__ import annotations

import email.utils
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest
from aiohttp import web

from infersight.client import Client, RetryPolicy
from infersight.core import errors as E

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
MSG = [{"role": "user", "content": "hi"}]


@asynccontextmanager
async def serve(handler: Handler) -> AsyncIterator[str]:
    app = web.Application()
    app.router.add_post("/v1/chat/completions", handler)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


async def sse(request: web.Request, body: bytes) -> web.StreamResponse:
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    await resp.write(body)
    await resp.write_eof()
    return resp


async def test_crlf_and_cr_line_endings() -> None:
    for eol in (b"\r\n", b"\r"):
        chunk = b'data: {"choices":[{"delta":{"content":"a"}}]}' + eol + eol
        body = (
            b": hello" + eol + eol + chunk * 3 + b'data: {"choices":[{"delta":{},'
            b'"finish_reason":"stop"}]}' + eol + eol + b"data: [DONE]" + eol + eol
        )

        async def h(request: web.Request, body: bytes = body) -> web.StreamResponse:
            return await sse(request, body)

        async with serve(h) as url, Client(url) as c:
            done = await c.chat(MSG)
        assert done.record.ok and done.text == "aaa" and done.record.tokens_estimated


async def test_200_with_error_body() -> None:
    async def h(request: web.Request) -> web.Response:
        return web.json_response({"error": {"message": "model is loading", "code": 503}})

    async with serve(h) as url, Client(url, retry=RetryPolicy.none()) as c:
        with pytest.raises(E.Overloaded, match="model is loading"):
            await c.chat(MSG, stream=False)


async def test_retry_after_http_date() -> None:
    calls: list[web.Request] = []

    async def h(request: web.Request) -> web.StreamResponse:
        calls.append(request)
        if len(calls) == 1:
            when = email.utils.formatdate(time.time() + 2, usegmt=True)
            return web.json_response(
                {"error": {"message": "slow down"}}, status=429, headers={"Retry-After": when}
            )
        return web.json_response(
            {"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}]}
        )

    waits: list[float] = []

    async def note(seconds: float) -> None:  # the client's wait, read, not spent
        waits.append(seconds)

    async with serve(h) as url, Client(url, retry=RetryPolicy(sleep=note)) as c:
        done = await c.chat(MSG, stream=False)
    assert done.text == "ok" and done.record.attempts == 2 and len(calls) == 2
    # the date 2 s ahead, at its 1 s resolution, read when the answer came: 1 to 2 s
    assert len(waits) == 1 and 1.0 <= waits[0] <= 2.01, waits


async def test_html_error_page_message() -> None:
    async def h(request: web.Request) -> web.Response:
        return web.Response(status=502, text="<html>Bad Gateway</html>", content_type="text/html")

    async with serve(h) as url, Client(url, retry=RetryPolicy.none()) as c:
        with pytest.raises(E.ServerError) as ei:
            await c.chat(MSG)
    assert ei.value.status == 502 and "Bad Gateway" in str(ei.value) and ei.value.retryable


async def test_finish_reason_without_done_is_ok_and_empty_stream_truncated() -> None:
    async def h(request: web.Request) -> web.StreamResponse:
        return await sse(
            request, b'data: {"choices":[{"delta":{"content":"x"},"finish_reason":"length"}]}\n\n'
        )

    async with serve(h) as url, Client(url) as c:
        done = await c.chat(MSG)
    assert done.record.ok and done.finish_reason == "length" and done.text == "x"

    async def empty(request: web.Request) -> web.StreamResponse:
        return await sse(request, b": keep-alive\n\n")

    async with serve(empty) as url, Client(url, retry=RetryPolicy.none()) as c:
        with pytest.raises(E.TruncatedStream):
            await c.chat(MSG)


async def test_vllms_last_token_without_text_comes_with_the_finishing_chunk() -> None:
    # As vLLM 0.32 streams with continuous_usage_stats: a token that makes no text yet
    # (part of a character) has no content chunk; the finishing chunk, whose content is
    # empty, says it was made. Its usage counts it: no mismatch.
    def ev(content: str, n: int, finish: str | None = None) -> bytes:
        delta = json.dumps({"content": content})
        fin = "null" if finish is None else f'"{finish}"'
        return (
            b'data: {"choices":[{"index":0,"delta":'
            + delta.encode()
            + b',"finish_reason":'
            + fin.encode()
            + b'}],"usage":{"prompt_tokens":3,"completion_tokens":'
            + str(n).encode()
            + b"}}\n\n"
        )

    body = (
        ev("", 0)
        + ev("a", 1)
        + ev("bc", 3)
        + ev("", 4, "length")
        + b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4}}\n\n'
        + b"data: [DONE]\n\n"
    )

    async def h(request: web.Request) -> web.StreamResponse:
        return await sse(request, body)

    async with serve(h) as url, Client(url, usage_per_chunk=True) as c:
        rec = (await c.chat(MSG)).record
    assert rec.ok and rec.chunk_tokens == [1, 3] and rec.completion_tokens == 4
    assert not rec.usage_mismatch
