"""gateway.listener and gateway.request_guard on a bare aiohttp app (the gateway's tests
cover them behind the gateway): what a server built on them gets, over real loopback
sockets."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from aiohttp import web

from infersight.gateway.listener import ClientLimits, Listener
from infersight.gateway.request_guard import RequestGuard, read_body
from support.raw_http import RawAnswer, exchange, request_bytes
from support.waiting import until


@asynccontextmanager
async def served(
    limits: ClientLimits,
) -> AsyncIterator[tuple[int, dict[str, int], Listener]]:
    seen = {"started": 0, "cancelled": 0, "finished": 0}

    async def slow(request: web.Request) -> web.Response:
        seen["started"] += 1
        try:
            await asyncio.sleep(float(request.query.get("s", "0")))
        except asyncio.CancelledError:
            seen["cancelled"] += 1
            raise
        seen["finished"] += 1
        return web.json_response({"ok": True})

    async def crash(request: web.Request) -> web.Response:
        raise RuntimeError("a bug with a secret: sk-abc")

    async def echo(request: web.Request) -> web.Response:
        return web.Response(body=await read_body(request, limits))

    guard = RequestGuard(limits, lambda r: None, lambda: {"X-Request-Id": "r1"})
    app = web.Application(middlewares=[guard.middleware])
    guard.add_routes(app, "/slow", {"GET": slow})
    guard.add_routes(app, "/crash", {"GET": crash})
    guard.add_routes(app, "/echo", {"POST": echo})
    guard.add_catch_all(app)
    listener = Listener(app, limits)
    await listener.start("127.0.0.1", 0)
    try:
        assert listener.port is not None
        yield listener.port, seen, listener
    finally:
        await listener.stop()


async def _send(port: int, parts: list[bytes | float]) -> RawAnswer:
    return await asyncio.to_thread(exchange, "127.0.0.1", port, parts)


async def test_a_crashing_handler_answers_json_500_without_details() -> None:
    events: list[str] = []
    lim = ClientLimits(on_event=events.append, headers=lambda: {"X-Request-Id": "r1"})
    async with served(lim) as (port, _, _):
        a = await asyncio.to_thread(exchange, "127.0.0.1", port, [request_bytes("GET", "/crash")])
    assert a.status == 500 and a.headers["content-type"].startswith("application/json")
    assert a.json()["error"]["type"] == "server_error" and b"sk-abc" not in a.body
    assert a.headers["x-request-id"] == "r1"


async def test_a_pipelined_head_waits_for_the_running_request() -> None:
    # A request that runs longer than the head timeout, with part of the next head
    # sent behind it: the running request is not cut (its answer arrives whole).
    async with served(ClientLimits(head_timeout_s=0.3)) as (port, seen, _):
        parts: list[bytes | float] = [
            request_bytes("GET", "/slow?s=1.0"),
            0.1,
            request_bytes("GET", "/slow")[:12],
        ]
        a = await asyncio.to_thread(exchange, "127.0.0.1", port, parts)
    assert a.status == 200 and a.json() == {"ok": True}
    # the handler ran its whole second, past the 0.3 s head limit, and was not cancelled
    assert seen == {"started": 1, "cancelled": 0, "finished": 1}


async def test_a_client_that_hangs_up_cancels_its_handler() -> None:
    events: list[str] = []
    async with served(ClientLimits(on_event=events.append)) as (port, seen, _):
        _, w = await asyncio.open_connection("127.0.0.1", port)
        w.write(request_bytes("GET", "/slow?s=30"))
        await w.drain()
        await until(lambda: seen["started"] == 1, "the handler to start")
        w.close()
        await until(lambda: seen["cancelled"] == 1, "the handler to be cancelled")
    assert seen == {"started": 1, "cancelled": 1, "finished": 0} and events == []


async def test_a_stalled_head_or_body_is_408_and_a_whole_one_is_served() -> None:
    events: list[str] = []
    lim = ClientLimits(head_timeout_s=0.5, body_timeout_s=0.5, on_event=events.append)
    async with served(lim) as (port, _, _):
        whole = await _send(port, [request_bytes("POST", "/echo", b"hello")])
        assert whole.status == 200 and whole.body == b"hello"
        for cut in (request_bytes("POST", "/echo", b"hello")[:-2], b"GET /slow HTTP/1.1\r\nHo"):
            a = await _send(port, [cut])
            assert a.status == 408 and a.closed, a
            # the 408 is the 0.5 s limit firing (exchange gives up after 10 s: a bound
            # for giving up, not a timing to assert)
            assert a.json()["error"]["code"] == "request_timeout"
    assert events == ["body_timeout", "head_timeout"]


def _read_all(port: int) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        got = b""
        while chunk := sock.recv(65536):
            got += chunk
        return got


async def test_one_address_over_its_cap_gets_a_429_at_once() -> None:
    events: list[str] = []
    lim = ClientLimits(max_connections_per_client=2, on_event=events.append)
    async with served(lim) as (port, _, listener):
        held = [await asyncio.open_connection("127.0.0.1", port) for _ in range(2)]
        got = await asyncio.to_thread(_read_all, port)  # sends nothing, reads to the close
        assert got.startswith(b"HTTP/1.1 429 ") and b'"too_many_connections"' in got
        for _, w in held:
            w.close()
        await until(lambda: not listener.per_client, "the server to see both closes")
        assert (await _send(port, [request_bytes("GET", "/slow")])).status == 200
    assert events == ["connection_limit"]


async def test_wrong_methods_and_paths_are_json_405_and_404() -> None:
    async with served(ClientLimits()) as (port, _, _):
        a = await _send(port, [request_bytes("POST", "/slow", b"{}")])
        assert a.status == 405 and a.headers["allow"] == "GET,HEAD"
        assert a.json()["error"]["code"] == "method_not_allowed"
        for raw in (request_bytes("GET", "/nope"), b"OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n"):
            a = await _send(port, [raw])
            assert a.status == 404 and a.json()["error"]["code"] == "not_found"


async def test_a_target_that_is_no_path_is_answered_json_even_with_an_expect() -> None:
    # CONNECT's target is an authority and OPTIONS * has none: neither matches a route,
    # so an Expect header on them meets aiohttp's own handler before any middleware.
    targets = (b"CONNECT /v1/chat/completions", b"CONNECT h:443", b"OPTIONS *")
    async with served(ClientLimits()) as (port, _, _):
        for target in targets:
            for expect, status in ((b"", 404), (b"Expect: 200-ok\r\n", 417)):
                raw = target + b" HTTP/1.1\r\nHost: x\r\n" + expect + b"\r\n"
                a = await _send(port, [raw])
                assert a.status == status, (raw, a)
                assert a.headers["content-type"].startswith("application/json"), (raw, a)
                assert a.headers["x-request-id"] == "r1", (raw, a)
                err = a.json()["error"]
                assert err["type"] == "invalid_request_error", (raw, a)
                if status == 417:
                    assert err["code"] == "expectation_failed", (raw, a)
                    assert err["message"] == "unsupported Expect: 200-ok", (raw, a)
