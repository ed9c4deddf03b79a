"""The serve front's engine pool opens the next connection when an answer's is closed.

llama.cpp's HTTP server closes the connection after every streamed answer. An engine
on loopback that does the same (a real TCP server) shows the pool opening one spare at
once, the next request going out on it with no connect of its own, and a down engine
or a closed pool leaving nothing behind.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from infersight.core.errors import ConnectError, InfersightError
from infersight.gateway.front_relay import EnginePool, Exchange

STREAM = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
          b"Transfer-Encoding: chunked\r\n\r\n"
          b"e\r\ndata: [DONE]\n\n\r\n0\r\n\r\n")


class StreamingEngine(asyncio.Protocol):
    """Answers each request with a short stream, then closes, as llama.cpp does."""

    accepted = 0
    #: For each request: how many connections had been accepted when it arrived.
    seen: list[int] = []  # noqa: RUF012 - reset per test by `engine()`

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        StreamingEngine.accepted += 1
        self.transport: asyncio.Transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if b"\r\n\r\n" in data:
            StreamingEngine.seen.append(StreamingEngine.accepted)
            self.transport.write(STREAM)
            self.transport.close()


@asynccontextmanager
async def engine() -> AsyncIterator[int]:
    StreamingEngine.accepted, StreamingEngine.seen = 0, []
    server = await asyncio.get_running_loop().create_server(StreamingEngine, "127.0.0.1", 0)
    try:
        yield int(server.sockets[0].getsockname()[1])
    finally:
        server.close()
        await server.wait_closed()


class Sink:
    def __init__(self) -> None:
        self.out = bytearray()

    def write(self, data: bytes) -> None:
        self.out += data


async def relay_one(pool: EnginePool) -> tuple[InfersightError | None, bytes]:
    done: asyncio.Future[InfersightError | None] = asyncio.get_running_loop().create_future()
    sink = Sink()
    Exchange(pool, sink, b"POST /v1/chat/completions HTTP/1.1\r\nHost: e\r\n\r\n",  # type: ignore[arg-type]
             close_client=False, unchunk=False, on_done=done.set_result).start()
    error = await asyncio.wait_for(done, 5)
    return error, bytes(sink.out)


async def idle_after(pool: EnginePool, timeout: float = 2.0) -> int:
    end = asyncio.get_running_loop().time() + timeout
    while pool.stats()["idle_connections"] == 0 and asyncio.get_running_loop().time() < end:
        await asyncio.sleep(0.01)
    return int(pool.stats()["idle_connections"])


async def test_a_stream_s_closed_connection_is_replaced_before_the_next_request() -> None:
    async with engine() as port:
        pool = EnginePool("127.0.0.1", port)
        try:
            error, out = await relay_one(pool)
            assert error is None and out.endswith(b"0\r\n\r\n")
            assert await idle_after(pool) == 1  # the spare, open before anyone asked
            assert StreamingEngine.accepted == 2
            error, out = await relay_one(pool)
            assert error is None and b"data: [DONE]" in out
            # The second request arrived on the spare: no connect between the two.
            assert StreamingEngine.seen == [1, 2]
            assert await idle_after(pool) == 1 and StreamingEngine.accepted == 3
        finally:
            pool.close()


async def test_no_spare_while_one_is_idle_and_a_down_engine_leaves_nothing_open() -> None:
    async with engine() as port:
        pool = EnginePool("127.0.0.1", port)
        try:
            await relay_one(pool)
            assert await idle_after(pool) == 1
            spare = pool.take()
            assert spare is not None
            pool.give_back(spare)  # a kept-alive connection back: nothing new is opened
            await asyncio.sleep(0.2)
            assert StreamingEngine.accepted == 2 and pool.stats()["idle_connections"] == 1
        finally:
            pool.close()
    assert pool.stats()["idle_connections"] == 0
    async with engine() as port:
        pass  # the port is free again: nobody listens there
    pool = EnginePool("127.0.0.1", port)
    try:
        error, out = await relay_one(pool)
        assert isinstance(error, ConnectError) and out == b""
        await asyncio.sleep(0.2)
        assert pool.stats()["idle_connections"] == 0
    finally:
        pool.close()
