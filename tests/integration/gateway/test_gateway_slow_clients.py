"""Issue 12, gateway item 5: slow and malformed clients, over raw sockets.

A partial head, a short body or silence are cut at the configured timeouts (1 s here,
60 s by default), one address cannot hold more than its share of connections, and
malformed framing gets an OpenAI JSON 400 instead of aiohttp's text."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import orjson
import pytest
from gateway_stack import CHAT, StackFactory

from infersight_testkit.fake.openai import FakeConfig
from support.raw_http import RawAnswer, exchange, request_bytes
from support.waiting import until

PATH = "/v1/chat/completions"
TIMEOUTS: dict[str, Any] = {
    "client_header_timeout_s": 1.0,
    "client_body_timeout_s": 1.0,
    "keepalive_timeout_s": 1.0,
}
BODY = orjson.dumps(CHAT)


async def _send(port: int, parts: list[bytes | float], timeout: float = 10) -> RawAnswer:
    return await asyncio.to_thread(exchange, "127.0.0.1", port, parts, timeout=timeout)


def _json_error(a: RawAnswer, status: int) -> dict[str, Any]:
    assert a.status == status, (a.status, a.body)
    assert a.headers["content-type"].startswith("application/json")
    assert "x-request-id" in a.headers
    err = a.json()["error"]
    assert set(err) == {"message", "type", "code", "param"}
    return err  # type: ignore[no-any-return]


@pytest.mark.parametrize("case", ["partial_head", "short_body", "nothing"])
async def test_slow_clients_are_cut_at_the_timeouts(make_stack: StackFactory, case: str) -> None:
    head = request_bytes("POST", PATH, BODY)
    parts: list[bytes | float] = {
        "partial_head": [head[:30]],
        "short_body": [head[:-10]],
        "nothing": [],
    }[case]
    async with make_stack([FakeConfig(tokens=2)], **TIMEOUTS) as s:
        a = await _send(s.gw.port or 0, parts)
        # closed by the gateway's 1 s limits, before this client's own 10 s give-up
        # (aiohttp alone would have waited an hour)
        assert a.closed, a
        if case == "nothing":
            assert a.status is None  # a silent connection is just closed (idle)
        else:
            err = _json_error(a, 408)
            assert err["code"] == "request_timeout"
            reason = "head_timeout" if case == "partial_head" else "body_timeout"
            assert await s.metric("infersight_gateway_rejections_total", reason=reason) == 1
        assert s.fakes[0].stats["requests"] == 0


async def test_a_slow_but_steady_client_is_served(make_stack: StackFactory) -> None:
    # Each pause (0.4 s) is under the 1 s limits: the request goes through.
    head = request_bytes("POST", PATH, BODY)
    parts: list[bytes | float] = [head[:20], 0.4, head[20:60], 0.4, head[60:-20], 0.4, head[-20:]]
    async with make_stack([FakeConfig(tokens=2)], **TIMEOUTS) as s:
        a = await _send(s.gw.port or 0, parts)
        assert a.status == 200, a.body


async def test_idle_keep_alive_connections_are_closed(make_stack: StackFactory) -> None:
    async with make_stack([FakeConfig(tokens=2)], **TIMEOUTS) as s:
        with socket.create_connection(("127.0.0.1", s.gw.port or 0), timeout=10) as sock:
            sock.sendall(request_bytes("POST", PATH, BODY))
            data = b""
            # the answer, then the close of the idle connection: the event, which must
            # come before this socket's 10 s timeout (recv raises then)
            while chunk := await asyncio.to_thread(sock.recv, 65536):
                data += chunk
        assert data.startswith(b"HTTP/1.1 200"), data


async def test_connections_per_client_address_are_capped(make_stack: StackFactory) -> None:
    async with make_stack([FakeConfig(tokens=2)], max_connections_per_client=4) as s:
        port = s.gw.port or 0
        listener = s.gw.listener
        assert listener is not None
        held = [socket.create_connection(("127.0.0.1", port)) for _ in range(4)]
        try:
            await until(lambda: sum(listener.per_client.values()) == 4, "the four accepted")
            a = await _send(port, [request_bytes("POST", PATH, BODY)])
            err = _json_error(a, 429)
            assert err["code"] == "too_many_connections" and a.headers["retry-after"] == "1"
            assert a.closed
        finally:
            for sock in held:
                sock.close()
        await until(lambda: not listener.per_client, "the gateway to see the four closes")
        assert (await _send(port, [request_bytes("POST", PATH, BODY)])).status == 200
        assert await s.metric("infersight_gateway_rejections_total", reason="connection_limit") == 1


FRAMING = {
    "garbage request line": [b"GARBAGE\r\n\r\n"],
    "negative content-length": [
        b"POST " + PATH.encode() + b" HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n"
    ],
    "oversize header": [
        b"POST " + PATH.encode() + b" HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 20000 + b"\r\n\r\n"
    ],
    "bad chunk size": [
        b"POST " + PATH.encode() + b" HTTP/1.1\r\nHost: x\r\n"
        b"Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n"
    ],
    "secret in an oversize header": [
        b"GET /v1/models HTTP/1.1\r\nHost: x\r\n"
        b"Authorization: Bearer sk-very-secret-" + b"k" * 9000 + b"\r\n\r\n"
    ],
}


@pytest.mark.parametrize("case", sorted(FRAMING))
async def test_malformed_framing_gets_an_openai_json_400(
    make_stack: StackFactory, case: str
) -> None:
    async with make_stack([FakeConfig(tokens=2)]) as s:
        a = await _send(s.gw.port or 0, FRAMING[case])
        err = _json_error(a, 400)
        assert err["type"] == "invalid_request_error" and a.closed
        assert b"sk-very-secret" not in a.body  # the client's bytes are never echoed
        assert await s.metric("infersight_gateway_rejections_total", reason="malformed") == 1
        async with s.session.get(s.url + "/health") as r:
            assert r.status == 200


async def test_a_chunk_size_broken_mid_body_ends_at_the_body_timeout(
    make_stack: StackFactory,
) -> None:
    # aiohttp's C parser stops feeding a body whose chunk framing breaks midway
    # without failing its read; the stalled body is then cut at the body timeout.
    parts: list[bytes | float] = [
        b"POST " + PATH.encode() + b" HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked"
        b'\r\n\r\n2\r\n{"\r\n',
        0.3,
        b"zz\r\n}\r\n0\r\n\r\n",
    ]
    async with make_stack([FakeConfig(tokens=2)], **TIMEOUTS) as s:
        a = await _send(s.gw.port or 0, parts)
        assert _json_error(a, 408)["code"] == "request_timeout" and a.closed
        assert s.fakes[0].stats["requests"] == 0
