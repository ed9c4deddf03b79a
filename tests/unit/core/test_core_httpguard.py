"""core.httpguard on a bare aiohttp app (the gateway's tests cover it behind the
gateway): what any server built on it gets, over real loopback sockets."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from aiohttp import web

from infersight.core.httpguard import GuardedRunner, GuardSettings
from support.raw_http import exchange, request_bytes


@asynccontextmanager
async def served(guard: GuardSettings) -> AsyncIterator[tuple[int, dict[str, int]]]:
    seen = {"cancelled": 0}

    async def slow(request: web.Request) -> web.Response:
        try:
            await asyncio.sleep(float(request.query.get("s", "0")))
        except asyncio.CancelledError:
            seen["cancelled"] += 1
            raise
        return web.json_response({"ok": True})

    async def crash(request: web.Request) -> web.Response:
        raise RuntimeError("a bug with a secret: sk-abc")

    app = web.Application()
    app.router.add_get("/slow", slow)
    app.router.add_get("/crash", crash)
    runner = GuardedRunner(app, guard, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield site._server.sockets[0].getsockname()[1], seen  # type: ignore[union-attr]
    finally:
        await runner.cleanup()


async def test_a_crashing_handler_answers_json_500_without_details() -> None:
    events: list[str] = []
    async with served(GuardSettings(on_event=events.append,
                                    headers=lambda: {"X-Request-Id": "r1"})) as (port, _):
        a = await asyncio.to_thread(exchange, "127.0.0.1", port, [request_bytes("GET", "/crash")])
    assert a.status == 500 and a.headers["content-type"].startswith("application/json")
    assert a.json()["error"]["type"] == "server_error" and b"sk-abc" not in a.body
    assert a.headers["x-request-id"] == "r1"


async def test_a_pipelined_head_waits_for_the_running_request() -> None:
    # A request that runs longer than the head timeout, with part of the next head
    # sent behind it: the running request is not cut (its answer arrives whole).
    async with served(GuardSettings(head_timeout_s=0.3)) as (port, _):
        parts: list[bytes | float] = [request_bytes("GET", "/slow?s=1.0"), 0.1,
                                      request_bytes("GET", "/slow")[:12]]
        a = await asyncio.to_thread(exchange, "127.0.0.1", port, parts)
    assert a.status == 200 and a.elapsed >= 1.0


async def test_a_client_that_hangs_up_cancels_its_handler() -> None:
    events: list[str] = []
    async with served(GuardSettings(on_event=events.append)) as (port, seen):
        _, w = await asyncio.open_connection("127.0.0.1", port)
        w.write(request_bytes("GET", "/slow?s=30"))
        await w.drain()
        await asyncio.sleep(0.2)
        w.close()
        for _ in range(40):
            if seen["cancelled"]:
                break
            await asyncio.sleep(0.05)
    assert seen["cancelled"] == 1 and events == []
