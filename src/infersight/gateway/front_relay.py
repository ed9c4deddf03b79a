"""The serve front's side towards the engine: kept-alive connections and the relay.

An answer is passed to the client as it arrives. Its head is rewritten (the hop-by-hop
headers are the front's business, not the engine's); its body is written on exactly as
read, one write per read, without being parsed beyond the framing that says where the
answer ends (Content-Length, or the chunk sizes of a stream). Only for an HTTP/1.0
client, which cannot read chunked framing, are the chunks unwrapped.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, cast

from infersight.core.errors import ConnectError, ReadError

__all__ = ["EngineLink", "EnginePool", "Relay"]

#: An engine head larger than this is not an HTTP answer the front can trust.
_MAX_HEAD = 64 * 1024
#: Kept-alive connections idle longer than this are dropped instead of reused: the
#: engine's HTTP server (cpp-httplib) closes idle connections after 5 s.
_REUSE_IDLE_S = 3.0
_HOP = frozenset({b"connection", b"keep-alive", b"transfer-encoding"})


class Relay(asyncio.Protocol):
    """One connection to the engine; passes each answer on to a client transport."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.idle_since = time.monotonic()
        self.reusable = True
        self._sink: asyncio.WriteTransport | None = None
        self._done: asyncio.Future[None] | None = None
        self._head = b""
        self._mode = 0  # 0 head, 1 length, 2 chunked, 3 until close, 4 done
        self._left = 0  # length mode: body bytes to come; chunked: bytes of chunk + CRLF
        self._line = b""  # a chunk-size line split across reads
        self._trailers = False
        self._close_client = False
        self._unchunk = False
        #: Set once any byte of the answer was written to the client.
        self.started = False

    # -- driving one exchange ---------------------------------------------------------
    def begin(
        self, sink: asyncio.WriteTransport, request: list[bytes], *, close_client: bool,
        unchunk: bool,
    ) -> asyncio.Future[None]:
        """Send ``request`` and relay the answer to ``sink``; the future ends with it."""
        assert self.transport is not None
        loop = asyncio.get_running_loop()
        self._sink, self._done = sink, loop.create_future()
        self._head, self._mode, self._left, self._line, self._trailers = b"", 0, 0, b"", False
        self._close_client, self._unchunk, self.started = close_client, unchunk, False
        self.transport.writelines(request)
        return self._done

    def _finish(self, error: BaseException | None = None) -> None:
        self._mode = 4
        self._sink = None
        done, self._done = self._done, None
        if done is not None and not done.done():
            if error is None:
                done.set_result(None)
            else:
                done.set_exception(error)

    # -- asyncio.Protocol ----------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def data_received(self, data: bytes) -> None:
        sink = self._sink
        if sink is None:  # bytes nobody asked for: the connection is out of step
            self.reusable = False
            return
        if self._mode == 0:
            data = self._read_head(data, sink)
            if not data or self._mode == 4:
                return
        if self._mode == 1:
            if len(data) > self._left:  # more than announced: never reuse this link
                self.reusable = False
                data = data[: self._left]
            sink.write(data)
            self._left -= len(data)
            if self._left == 0:
                self._finish()
        elif self._mode == 2:
            self._chunks(data, sink)
        elif self._mode == 3:
            sink.write(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.reusable = False
        self.transport = None
        if self._mode == 3:
            self._finish()  # a close-delimited answer ends here
        elif self._done is not None:
            self._finish(ReadError("the engine closed the connection mid-answer"))

    def pause_client(self, paused: bool) -> None:
        """Follow the client's write buffer: stop reading while it is full."""
        if self.transport is not None and not self.transport.is_closing():
            if paused:
                self.transport.pause_reading()
            else:
                self.transport.resume_reading()

    # -- framing ------------------------------------------------------------------------
    def _read_head(self, data: bytes, sink: asyncio.WriteTransport) -> bytes:
        buf = self._head + data
        end = buf.find(b"\r\n\r\n")
        if end < 0:
            if len(buf) > _MAX_HEAD:
                self.reusable = False
                self._finish(ReadError("the engine sent an oversized answer head"))
            self._head = buf
            return b""
        self._head = b""
        lines = buf[:end].split(b"\r\n")
        status = int(lines[0][9:12]) if len(lines[0]) >= 12 and lines[0][9:12].isdigit() else 0
        out = [lines[0]]
        length: int | None = None
        chunked = False
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            lname = name.strip().lower()
            if lname in _HOP:
                if lname == b"connection" and b"close" in value.lower():
                    self.reusable = False
                elif lname == b"transfer-encoding":
                    chunked = b"chunked" in value.lower()
                    if not self._unchunk:
                        out.append(line)
                continue
            if lname == b"content-length":
                length = int(value.strip())
            elif lname == b"access-control-allow-origin":
                continue  # the front forwards no Origin; an empty grant means nothing
            out.append(line)
        if self._close_client or (chunked and self._unchunk):
            out.append(b"Connection: close")
        out.append(b"\r\n")
        sink.write(b"\r\n".join(out))
        self.started = True
        rest = buf[end + 4 :]
        if status in (204, 304) or 100 <= status < 200 or (length == 0 and not chunked):
            self._finish()
            return b""
        if chunked:
            self._mode = 2
        elif length is not None:
            self._mode, self._left = 1, length
        else:
            self._mode, self.reusable = 3, False
        return rest

    def _chunks(self, data: bytes, sink: asyncio.WriteTransport) -> None:
        # Walks the chunk framing to find the end; the bytes go on unchanged (or, for an
        # HTTP/1.0 client, only the chunks' payloads).
        pos, n = 0, len(data)
        pieces: list[bytes] | None = [] if self._unchunk else None
        while pos < n:
            if self._left:
                take = min(self._left, n - pos)
                if pieces is not None and self._left > 2:
                    pieces.append(data[pos : pos + min(take, self._left - 2)])
                pos += take
                self._left -= take
                continue
            nl = data.find(b"\n", pos)
            if nl < 0:
                self._line += data[pos:]
                if len(self._line) > 4096:
                    self.reusable = False
                    self._finish(ReadError("the engine sent a malformed chunked answer"))
                    return
                break
            line, self._line = (self._line + data[pos:nl]).strip(), b""
            pos = nl + 1
            if self._trailers:
                if not line:
                    self._write(sink, data[:pos], pieces)
                    if pos < n:
                        self.reusable = False
                    self._finish()
                    return
                continue
            try:
                size = int(line.split(b";", 1)[0], 16)
            except ValueError:
                self.reusable = False
                self._finish(ReadError("the engine sent a malformed chunk size"))
                return
            if size == 0:
                self._trailers = True
            else:
                self._left = size + 2
        self._write(sink, data, pieces)

    def _write(self, sink: asyncio.WriteTransport, data: bytes, pieces: list[bytes] | None) -> None:
        if pieces is None:
            sink.write(data)
        elif pieces:
            sink.writelines(pieces)


class EngineLink:
    """One request's use of a pooled connection (see :meth:`EnginePool.exchange`)."""

    def __init__(self) -> None:
        self.relay: Relay | None = None
        self.aborted = False
        #: Whether part of the answer reached the client before the exchange failed.
        self.started = False

    def pause_client(self, paused: bool) -> None:
        if self.relay is not None:
            self.relay.pause_client(paused)

    def abort(self) -> None:
        """The client left: drop the engine connection (the engine cancels the task)."""
        self.aborted = True
        relay, self.relay = self.relay, None
        if relay is not None and relay.transport is not None:
            relay.reusable = False
            relay.transport.abort()


class EnginePool:
    """Kept-alive connections to the engine on loopback, reused newest first."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self._idle: list[Relay] = []
        self._closed = False

    async def _connect(self) -> Relay:
        loop = asyncio.get_running_loop()
        try:
            _, relay = await loop.create_connection(Relay, self.host, self.port)
        except OSError as e:
            raise ConnectError(f"the engine is not reachable: {e.strerror or e}") from None
        return relay

    def _take(self) -> Relay | None:
        now = time.monotonic()
        while self._idle:
            relay = self._idle.pop()
            t = relay.transport
            if t is not None and not t.is_closing() and now - relay.idle_since < _REUSE_IDLE_S:
                return relay
            if t is not None:
                t.close()
        return None

    def _give_back(self, relay: Relay) -> None:
        t = relay.transport
        if self._closed or not relay.reusable or t is None or t.is_closing():
            if t is not None:
                t.close()
            return
        relay.idle_since = time.monotonic()
        self._idle.append(relay)

    async def exchange(
        self, link: EngineLink, sink: asyncio.WriteTransport, request: list[bytes], *,
        close_client: bool, unchunk: bool,
    ) -> None:
        """Send ``request`` and relay the whole answer to ``sink``.

        A reused connection that the engine had closed before answering is replaced
        once by a fresh one (nothing reached the client, and the engine never saw the
        request). Raises ConnectError or ReadError (``link.relay.started`` tells whether
        part of the answer was already written).
        """
        relay = self._take()
        fresh = relay is None
        while True:
            if relay is None:
                relay = await self._connect()
            if link.aborted:
                self._give_back(relay)
                return
            link.relay = relay
            try:
                await relay.begin(sink, request, close_client=close_client, unchunk=unchunk)
            except ReadError:
                link.relay = None
                link.started = relay.started
                self._give_back(relay)  # not reusable any more: closed
                if fresh or relay.started or link.aborted:
                    raise
                relay, fresh = None, True
                continue
            link.relay = None
            self._give_back(relay)
            return

    def close(self) -> None:
        self._closed = True
        for relay in self._idle:
            if relay.transport is not None:
                relay.transport.close()
        self._idle.clear()

    def stats(self) -> dict[str, Any]:
        return {"idle_connections": len(self._idle)}
