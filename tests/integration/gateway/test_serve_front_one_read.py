"""The serve front answers a request that arrives in one read exactly as one that
arrives in pieces.

A whole request in one read (the usual case) is taken straight from that read; any
other arrival goes through the buffered path. A real front on loopback, in front of a
loopback engine that answers with a Content-Length, gets the same requests both ways:
the answers must be byte-identical, a refusal counted once, and a malformed head
refused with the same error.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from infersight.gateway.front import FrontConfig, ServeFront

ANSWER = b'{"id":"x","object":"chat.completion","choices":[]}'
KEY = "sk-one-read-test-key"


class Engine(asyncio.Protocol):
    """Answers every request with ANSWER, echoing what reached it in a header."""

    bodies: list[bytes] = []  # noqa: RUF012 - reset per test by `front()`

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport: asyncio.Transport = transport  # type: ignore[assignment]
        self.buf = b""

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while (end := self.buf.find(b"\r\n\r\n")) >= 0:
            head = self.buf[:end].lower()
            n = 0
            if b"content-length:" in head:
                n = int(head.split(b"content-length:")[1].split(b"\r\n")[0])
            if len(self.buf) < end + 4 + n:
                return
            Engine.bodies.append(self.buf[end + 4 : end + 4 + n])
            self.buf = self.buf[end + 4 + n :]
            self.transport.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                 b"Keep-Alive: timeout=5, max=100\r\n"
                                 b"Content-Length: %d\r\n\r\n" % len(ANSWER) + ANSWER)


@asynccontextmanager
async def front() -> AsyncIterator[ServeFront]:
    Engine.bodies = []
    loop = asyncio.get_running_loop()
    engine = await loop.create_server(Engine, "127.0.0.1", 0)
    cfg = FrontConfig(engine_host="127.0.0.1",
                      engine_port=int(engine.sockets[0].getsockname()[1]),
                      engine_key="internal", model="m", api_key=KEY)
    f = ServeFront(cfg)
    await f.start()
    try:
        yield f
    finally:
        await f.stop()
        engine.close()
        await engine.wait_closed()


async def exchange(port: int, wire: bytes, *, pieces: bool) -> bytes:
    """Send ``wire`` in one write, or a few bytes at a time; read until the server has
    answered and stays quiet (or closes)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        if pieces:
            for i in range(0, len(wire), 7):
                writer.write(wire[i : i + 7])
                await writer.drain()
                await asyncio.sleep(0.001)
        else:
            writer.write(wire)
        out = b""
        while True:
            try:
                got = await asyncio.wait_for(reader.read(65536), 0.3)
            except TimeoutError:
                return out
            if not got:
                return out
            out += got
    finally:
        writer.close()


def chat(body: dict[str, object], *, key: str | None = KEY, extra: str = "") -> bytes:
    raw = json.dumps(body).encode()
    auth = f"Authorization: Bearer {key}\r\n" if key else ""
    return (f"POST /v1/chat/completions HTTP/1.1\r\nHost: h\r\n{auth}{extra}"
            f"Content-Type: application/json\r\nContent-Length: {len(raw)}\r\n\r\n"
            ).encode() + raw


#: What the openai client sends besides the usual: a dozen more headers.
MANY = "".join(f"X-Stainless-{i}: v{i}\r\n" for i in range(12))
GOOD = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}

CASES = {
    "relayed": chat(GOOD),
    "relayed, many headers": chat(GOOD, extra=MANY),
    "no key": chat(GOOD, key=None),
    "wrong key": chat(GOOD, key="sk-wrong"),
    "wrong method": b"GET /v1/chat/completions HTTP/1.1\r\nHost: h\r\n"
                    b"Authorization: Bearer " + KEY.encode() + b"\r\n\r\n",
    "unknown model": chat({**GOOD, "model": "other"}),
    "bad body": chat({"model": "m", "messages": [{"content": "no role"}]}),
    "bad request line": b"POST  /v1/chat/completions HTTP/1.1\r\nHost: h\r\n\r\n",
    "repeated length": b"POST /v1/chat/completions HTTP/1.1\r\nHost: h\r\n"
                       b"Content-Length: 2\r\nContent-Length: 2\r\n\r\n{}",
}


@pytest.mark.parametrize("name", list(CASES))
async def test_one_read_and_pieces_get_the_same_answer_and_count(name: str) -> None:
    wire = CASES[name]
    answers, refused, reached = [], [], []
    for pieces in (False, True):
        async with front() as f:
            assert f.port is not None
            answers.append(await exchange(f.port, wire, pieces=pieces))
            refused.append(sum(f.refused.values()))
            reached.append(list(Engine.bodies))
    assert answers[0] == answers[1] and answers[0].startswith(b"HTTP/1.1 ")
    assert refused[0] == refused[1] <= 1  # a refusal is counted once, either way
    assert reached[0] == reached[1]
    if name.startswith("relayed"):
        assert answers[0].endswith(ANSWER) and refused[0] == 0
        assert reached[0] == [json.dumps(GOOD).encode()]
        assert b"keep-alive:" not in answers[0].lower()  # the engine's terms stay inside
    else:
        assert refused[0] == 1 or name in ("bad request line", "repeated length")
        assert reached[0] == [] and b'"error"' in answers[0]


async def test_pipelined_requests_in_one_read_are_answered_in_order() -> None:
    """Two requests in one read are not "one whole request": both are answered."""
    async with front() as f:
        assert f.port is not None
        second = {**GOOD, "max_tokens": 4}
        out = await exchange(f.port, chat(GOOD) + chat(second), pieces=False)
        assert out.count(b"HTTP/1.1 200 OK") == 2
        assert Engine.bodies == [json.dumps(GOOD).encode(), json.dumps(second).encode()]
