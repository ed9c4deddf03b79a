"""A raw HTTP/1.1 server on loopback whose keep-alive habits a test chooses.

``close_after_stream`` reproduces llama.cpp's server: it answers a streamed request
with a chunked SSE body, announces ``Keep-Alive``, then closes the connection
``lag`` seconds after the final chunk without reading anything in between (llama.cpp
returns false from its chunked content provider; cpp-httplib then leaves its
keep-alive loop, and the HTTP thread may be descheduled before it closes). Bytes the
client wrote into such a doomed connection are counted in ``doomed_writes``.

``read_then_close`` reads the n-th request completely and closes without answering:
the server had the request, so a client must not send it again by itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from dataclasses import dataclass, field
from typing import Any

import orjson

_DONE = b"data: [DONE]\n\n"


def _event(i: int, text: str, finish: str | None = None) -> bytes:
    choice = {"index": 0, "delta": {"content": text}, "finish_reason": finish}
    return b"data: " + orjson.dumps({"id": f"c{i}", "choices": [choice]}) + b"\n\n"


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


@dataclass
class KeepAliveServer:
    """``async with KeepAliveServer(...) as srv:`` then ``srv.base_url``."""

    server_header: str = "test-server"
    #: Close a connection this long after each streamed answer (None: keep it).
    close_after_stream: float | None = None
    #: Read this request (1-based, counted over the server) and close without answer.
    read_then_close: int | None = None
    requests_read: int = 0
    connections: int = 0
    #: Connections closed by the server with bytes of an unread request in them.
    doomed_writes: int = 0
    #: The server side of every open connection (tests may close them).
    sockets: list[Any] = field(default_factory=list)
    _server: asyncio.Server | None = None
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)

    @property
    def base_url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    async def start(self) -> KeepAliveServer:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return self

    async def __aenter__(self) -> KeepAliveServer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            for task in self._tasks:
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            await asyncio.wait_for(self._server.wait_closed(), 5)

    def shut_idle_connections(self) -> None:
        """Send FIN on every open connection now (synchronously, no loop turn)."""
        for sock in self.sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    async def _read(self, reader: asyncio.StreamReader) -> dict[str, Any] | None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            return None
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":", 1)[1])
        body = await reader.readexactly(length)
        self.requests_read += 1
        doc: dict[str, Any] = orjson.loads(body) if body else {}
        return doc

    def _head(self, extra: bytes) -> bytes:
        return (
            b"HTTP/1.1 200 OK\r\nServer: "
            + self.server_header.encode()
            + b"\r\nKeep-Alive: timeout=5, max=100\r\n"
            + extra
            + b"\r\n"
        )

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        sock = writer.get_extra_info("socket")
        self.sockets.append(sock)
        try:
            while (doc := await self._read(reader)) is not None:
                if self.read_then_close == self.requests_read:
                    return
                if doc.get("stream"):
                    await self._stream(writer)
                    if self.close_after_stream is not None:
                        await asyncio.sleep(self.close_after_stream)
                        if await _unread(reader):
                            self.doomed_writes += 1
                        return
                else:
                    body = orjson.dumps(
                        {
                            "choices": [
                                {
                                    "index": 0,
                                    "message": {"role": "assistant", "content": "hi"},
                                    "finish_reason": "stop",
                                }
                            ],
                            "usage": {"prompt_tokens": 3, "completion_tokens": 1},
                        }
                    )
                    writer.write(
                        self._head(
                            b"Content-Type: application/json\r\nContent-Length: "
                            + str(len(body)).encode()
                            + b"\r\n"
                        )
                        + body
                    )
                    await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self.sockets.remove(sock)
            writer.close()

    async def _stream(self, writer: asyncio.StreamWriter) -> None:
        writer.write(
            self._head(b"Content-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n")
        )
        for i, text in enumerate(("Hel", "lo", "!")):
            writer.write(_chunk(_event(i, text)))
            await writer.drain()
            await asyncio.sleep(0.002)
        usage = orjson.dumps({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 3}})
        writer.write(_chunk(_event(3, "", "stop") + b"data: " + usage + b"\n\n" + _DONE))
        writer.write(b"0\r\n\r\n")
        await writer.drain()


async def _unread(reader: asyncio.StreamReader) -> bool:
    """Whether bytes of a request wait in a connection the server is about to close."""
    try:
        return bool(await asyncio.wait_for(reader.read(1), 0.01))
    except (TimeoutError, ConnectionError):
        return False
