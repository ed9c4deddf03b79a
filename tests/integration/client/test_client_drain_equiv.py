"""request() (drain: read to the end, no events handed out) must give the same record
and answer as stream() + events() and as stream() + raw_chunks() (passthrough)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any, ClassVar

import orjson
import pytest
from aiohttp import web
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infersight.client import Client, RetryPolicy, Timeouts
from infersight.core.errors import InfersightError


class Box:
    writes: ClassVar[list[bytes]] = []
    pause = False


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[asyncio.AbstractEventLoop, Client]]:
    loop = asyncio.new_event_loop()

    async def handler(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for w in Box.writes:
            await resp.write(w)
            if Box.pause:
                await asyncio.sleep(0.001)  # separate reads: one event per read
        await resp.write_eof()
        return resp

    async def start() -> tuple[web.AppRunner, Client]:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", handler)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        client = Client(
            f"http://127.0.0.1:{port}", retry=RetryPolicy.none(), timeouts=Timeouts(total=10.0)
        )
        return runner, client

    runner, client = loop.run_until_complete(start())
    yield loop, client
    loop.run_until_complete(client.close())
    loop.run_until_complete(runner.cleanup())
    loop.close()


def ch(**choice: Any) -> dict[str, Any]:
    return {"object": "chat.completion.chunk", "choices": [{"index": 0, **choice}]}


CHUNKS: list[Any] = [
    ch(delta={"content": "a"}, finish_reason=None),
    ch(delta={"content": "b", "reasoning_content": None, "tool_calls": None}),
    ch(delta={"role": "assistant", "content": ""}),
    ch(delta={"content": "c"}, logprobs={"content": [{"t": 1}, {"t": 2}]}),
    ch(delta={"content": "d"}, logprobs=None, finish_reason="length"),
    ch(
        delta={
            "tool_calls": [{"index": 0, "id": "t1", "function": {"name": "f", "arguments": "{"}}]
        }
    ),
    ch(delta={"content": "e", "tool_calls": [{"index": 0, "function": {"arguments": "}"}}]}),
    ch(delta={"reasoning_content": "think"}),
    ch(delta={}, finish_reason="stop"),
    ch(text="f", finish_reason=None, logprobs=None),
    {
        "object": "chat.completion.chunk",
        "choices": [
            {"index": 0, "delta": {"content": "g"}},
            {"index": 1, "delta": {"content": "h"}},
        ],
    },
    {
        "object": "chat.completion.chunk",
        "choices": [],
        "usage": {"prompt_tokens": 2, "completion_tokens": 5},
    },
    {**ch(delta={"content": "i"}), "usage": None},
    {"error": {"message": "boom", "code": 500}},
    "[DONE]",
    "garbage{",
]


def sse(item: Any) -> bytes:
    if isinstance(item, str):
        return b"data: " + item.encode() + b"\n\n"
    return b"data: " + orjson.dumps(item) + b"\n\n"


def facts(out: Any) -> tuple[Any, ...]:
    if isinstance(out, InfersightError):
        rec = out.record
        assert rec is not None
        return ("error", out.kind, rec.chunk_tokens, rec.finish_reason)
    rec = out.record
    return (
        "ok",
        rec.chunk_tokens,
        rec.completion_tokens,
        rec.prompt_tokens,
        rec.tokens_estimated,
        rec.usage_mismatch,
        rec.finish_reason,
        out.text,
        out.usage,
        out.response["choices"][0].get("message", {}).get("tool_calls"),
    )


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(st.sampled_from(CHUNKS), min_size=1, max_size=10),
    st.sampled_from(["events", "whole", "bytes", "23"]),
)
def test_request_equals_stream_events(
    server: tuple[asyncio.AbstractEventLoop, Client], items: list[Any], mode: str
) -> None:
    loop, client = server
    events = [sse(CHUNKS[0]), *(sse(i) for i in items)]  # content first: the stream enters
    body_bytes = b"".join(events)
    Box.pause = mode == "events"
    if mode in ("events", "whole"):
        Box.writes = events if mode == "events" else [body_bytes]
    else:
        step = 1 if mode == "bytes" else 23
        Box.writes = [body_bytes[i : i + step] for i in range(0, len(body_bytes), step)]
    body = {"messages": [{"role": "user", "content": "x"}], "stream": True}

    async def via_request() -> Any:
        try:
            return await client.request("/v1/chat/completions", body)
        except InfersightError as e:
            return e

    async def via_events() -> Any:
        try:
            async with client.stream("/v1/chat/completions", body) as s:
                async for _ in s.events():
                    pass
            return s.completion()
        except InfersightError as e:
            return e

    raw: list[bytes] = []

    async def via_raw() -> Any:
        try:
            async with client.stream("/v1/chat/completions", body) as s:
                async for piece in s.raw_chunks():
                    raw.append(piece)
            return s.completion()
        except InfersightError as e:
            return e

    a = loop.run_until_complete(via_request())
    b = loop.run_until_complete(via_events())
    c = loop.run_until_complete(via_raw())
    assert facts(a) == facts(b) == facts(c)
    # Passthrough forwards exactly the good events' bytes, in order.
    good = b"".join(raw)
    assert body_bytes.startswith(good) and all(p.endswith(b"\n\n") for p in raw)
