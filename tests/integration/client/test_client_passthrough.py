"""Passthrough (raw_chunks), good events before a malformed one, and hot-path hygiene."""

from __future__ import annotations

import gc
import re
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import orjson
import pytest
from aiohttp import web

from infersight.client import Client, RetryPolicy, StreamResponse
from infersight.core import errors as E
from infersight_testkit import FakeConfig, FakeOpenAI

MSG = [{"role": "user", "content": "one two three"}]
BODY = {"messages": MSG, "stream": True}


def sse(obj: object) -> bytes:
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def content(text: str) -> bytes:
    return sse(
        {
            "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}],
        }
    )


_PER_REQUEST = re.compile(rb'"(id|created)":("[^"]*"|\d+)')


def per_request(stream: bytes) -> bytes:
    """``stream`` with the fields that differ between two requests blanked."""
    return _PER_REQUEST.sub(rb'"\1":_', stream)


@asynccontextmanager
async def one_write_server(body: bytes) -> AsyncIterator[str]:
    """A server that sends ``body`` in a single write (so one read holds all of it)."""

    async def handler(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await resp.write(body)
        await resp.write_eof()
        return resp

    app = web.Application()
    app.router.add_post("/v1/chat/completions", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


@pytest.mark.parametrize("keepalive", [False, True])
async def test_raw_chunks_whole_events_and_same_record(keepalive: bool) -> None:
    cfg = FakeConfig(ttft=0.02, itl=0.005, tokens=12, keepalive=keepalive)
    async with FakeOpenAI(cfg).running() as srv, Client(srv.base_url) as c:
        async with c.stream("/v1/chat/completions", BODY) as s:
            evs = [ev async for ev in s.events()]
        async with c.stream("/v1/chat/completions", BODY) as r:
            assert isinstance(r, StreamResponse)
            pieces = [p async for p in r.raw_chunks()]
    assert all(p.endswith(b"\n\n") and p.startswith(b"data: ") for p in pieces)  # whole events
    # Byte-exact passthrough: the same events as the other request, which differs only
    # in its id and in `created`, the second it was answered in.
    assert per_request(b"".join(pieces)) == per_request(b"".join(ev.raw for ev in evs))
    assert b": keep-alive" not in b"".join(pieces)
    a, b = s.record, r.record
    assert a.ok and b.ok and b.error is None and r.done and r.finish_reason == "stop"
    assert len(b.chunk_times) == len(a.chunk_times) == 12 and b.chunk_tokens == [1] * 12
    assert b.completion_tokens == 12 and b.prompt_tokens == 3 and not b.usage_mismatch
    assert b.sent is not None and b.headers is not None and b.end is not None
    assert b.scheduled <= b.sent <= b.headers <= b.chunk_times[0] <= b.chunk_times[-1] <= b.end
    assert r.usage == {"prompt_tokens": 3, "completion_tokens": 12, "total_tokens": 15}


async def test_raw_chunks_drop_usage_only() -> None:
    async with (
        FakeOpenAI(FakeConfig(ttft=0.0, itl=0.0, tokens=4)).running() as srv,
        Client(srv.base_url) as c,
        c.stream("/v1/chat/completions", BODY) as r,
    ):
        data = b"".join([p async for p in r.raw_chunks(drop_usage_only=True)])
    assert b'"usage"' not in data and data.endswith(b"data: [DONE]\n\n")
    assert data.count(b'"content":"tok "') == 4
    assert r.record.ok and r.usage is not None and r.record.completion_tokens == 4


async def test_raw_chunks_error_event_raises_after_good_bytes() -> None:
    cfg = FakeConfig(ttft=0.0, itl=0.01, tokens=10)
    async with FakeOpenAI(cfg).running() as srv, Client(srv.base_url) as c:
        got: list[bytes] = []
        with pytest.raises(E.ServerError) as ei:
            async with c.stream(
                "/v1/chat/completions", BODY, headers={"X-Fake-Behavior": "error:3"}
            ) as r:
                async for p in r.raw_chunks():
                    got.append(p)
    data = b"".join(got)
    assert data.count(b'"content":"tok "') == 3 and b"error" not in data
    rec = ei.value.record
    assert (
        rec is not None and not rec.ok and rec.error == "ServerError" and len(rec.chunk_times) == 3
    )


GOOD_THEN_BAD = (
    content("")
    + content("a")
    + content("b")
    + content("c")
    + b'data: {"choices": [{"delta": {"content": "x"\n\n'
)


async def test_good_events_before_malformed_are_kept_events() -> None:
    async with one_write_server(GOOD_THEN_BAD) as url, Client(url, retry=RetryPolicy.none()) as c:
        texts: list[str] = []
        with pytest.raises(E.MalformedStream) as ei:
            async with c.stream("/v1/chat/completions", BODY) as s:
                async for ev in s.events():
                    texts.append(ev.text)
        assert texts == ["", "a", "b", "c"]  # all good events first, then the error
        rec = ei.value.record
        assert rec is not None and rec.error == "MalformedStream" and len(rec.chunk_times) == 3

        with pytest.raises(E.MalformedStream) as ei2:
            await c.chat(MSG)
        rec2 = ei2.value.record
        assert rec2 is not None and len(rec2.chunk_times) == 3 and rec2.chunk_tokens == [1, 1, 1]

        pieces: list[bytes] = []
        with pytest.raises(E.MalformedStream):
            async with c.stream("/v1/chat/completions", BODY) as r:
                async for p in r.raw_chunks():
                    pieces.append(p)
        assert b"".join(pieces) == GOOD_THEN_BAD[: GOOD_THEN_BAD.index(b'data: {"choices": [')]


async def test_only_malformed_before_content_raises_before_enter() -> None:
    async with (
        one_write_server(content("") + b"data: {nope}\n\n") as url,
        Client(url, retry=RetryPolicy.none()) as c,
    ):
        with pytest.raises(E.MalformedStream):
            async with c.stream("/v1/chat/completions", BODY):
                pytest.fail("entered a stream that never had content")


async def test_ids_sent_stamp_and_no_reference_cycles() -> None:
    async with (
        FakeOpenAI(FakeConfig(ttft=0.0, itl=0.0, tokens=3)).running() as srv,
        Client(srv.base_url) as c,
    ):
        t0 = time.monotonic()
        first = await c.chat(MSG)
        rec = first.record
        assert re.fullmatch(r"[0-9a-f]{32}", rec.request_id)
        assert rec.sent is not None and t0 <= rec.scheduled <= rec.sent <= rec.headers  # type: ignore[operator]
        gc.collect()
        gc.disable()
        try:
            ids = set()
            for _ in range(20):
                done = await c.chat(MSG)
                ids.add(done.record.request_id)
                async with c.stream("/v1/chat/completions", BODY) as s:
                    async for _ev in s.events():
                        pass
                del done, s
            # Finished responses are freed by reference counting alone (no cycles),
            # so the hot path never feeds the cycle collector.
            alive = [o for o in gc.get_objects() if isinstance(o, StreamResponse)]
            assert alive == []
        finally:
            gc.enable()
        assert len(ids) == 20 and rec.request_id not in ids
