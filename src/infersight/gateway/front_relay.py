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
from collections.abc import Callable
from typing import Any, cast

from infersight.core.errors import ConnectError, InfersightError, ReadError

__all__ = ["EnginePool", "Exchange", "Relay"]

#: An engine head larger than this is not an HTTP answer the front can trust.
_MAX_HEAD = 64 * 1024
#: Kept-alive connections idle longer than this are dropped instead of reused: the
#: engine's HTTP server (cpp-httplib) closes idle connections after 5 s.
_REUSE_IDLE_S = 3.0
_HOP = frozenset({b"connection", b"keep-alive", b"transfer-encoding"})
#: Reads up to this size may be taken as one whole chunk without walking them.
_WHOLE_MAX = 16 * 1024


def _chunk_heads() -> list[bytes | tuple[()]]:
    """For each read length n, the size line a read of exactly one whole chunk of that
    length starts with (``b"8c\r\n"`` for 146 bytes). A chunk of s bytes takes
    len(hex(s)) + s + 4 bytes, which grows with s, so at most one size fits each n. A
    length no size fits gets ``()``, an empty tuple of prefixes: nothing starts with it."""
    heads: list[bytes | tuple[()]] = [()] * _WHOLE_MAX
    for size in range(1, _WHOLE_MAX):
        line = b"%x\r\n" % size
        n = len(line) + size + 2
        if n < _WHOLE_MAX:
            heads[n] = line
    return heads


_CHUNK_HEADS = _chunk_heads()


def _header(low: bytes, name: bytes) -> bytes | None:
    """The value of header ``name`` in a lower-cased head (status line first), or None."""
    at = low.find(b"\r\n" + name + b":")
    if at < 0:
        return None
    start = at + len(name) + 3
    end = low.find(b"\r\n", start)
    return low[start : end if end >= 0 else len(low)].strip()


class Relay(asyncio.Protocol):
    """One connection to the engine; passes each answer on to a client transport."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.idle_since = time.monotonic()
        self.reusable = True
        self._sink: asyncio.WriteTransport | None = None
        self._on_done: Callable[[InfersightError | None], None] | None = None
        self._head = b""
        self._mode = 0  # 0 head, 1 length, 2 chunked, 3 until close, 4 done
        self._left = 0  # length mode: body bytes to come; chunked: bytes of chunk + CRLF
        self._line = b""  # a chunk-size line split across reads
        self._prefix = b""  # the rewritten head, sent with the first body bytes
        self._trailers = False
        self._close_client = False
        self._unchunk = False
        #: Between two chunks of a chunked answer, with nothing pending: a read that is
        #: exactly one whole chunk can be written on as it is.
        self._whole = False
        #: Set once any byte of the answer was written to the client.
        self.started = False

    # -- driving one exchange ---------------------------------------------------------
    def begin(
        self, sink: asyncio.WriteTransport, request: bytes, *, close_client: bool,
        unchunk: bool, on_done: Callable[[InfersightError | None], None],
    ) -> None:
        """Send ``request``, relay the answer to ``sink``, then call ``on_done``."""
        assert self.transport is not None
        self._sink, self._on_done = sink, on_done
        self._head, self._mode, self._left, self._line, self._trailers = b"", 0, 0, b"", False
        self._close_client, self._unchunk, self.started = close_client, unchunk, False
        self._prefix, self._whole = b"", False
        self.transport.write(request)

    def _finish(self, error: InfersightError | None = None) -> None:
        self._mode, self._whole = 4, False
        self._sink = None
        done, self._on_done = self._on_done, None
        if done is not None:
            done(error)

    # -- asyncio.Protocol ----------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def data_received(self, data: bytes) -> None:
        sink = self._sink
        if sink is None:  # bytes nobody asked for: the connection is out of step
            self.reusable = False
            return
        if self._whole:
            # A stream's usual read, once per token: exactly one whole chunk (one SSE
            # event), recognised by its length and the size line it must start with.
            # Two operations and no more, on purpose: after an engine step every piece
            # of C code run is fetched from memory again (the step streamed the weights
            # through the caches), so each costs microseconds; a regex or int() here
            # cost 25 us per chunk.
            n = len(data)
            if n < _WHOLE_MAX and data.startswith(_CHUNK_HEADS[n]):
                sink.write(data)
                return
        if self._mode == 0:
            data = self._read_head(data, sink)
            if not data or self._mode == 4:
                return
        if self._mode == 1:
            if len(data) > self._left:  # more than announced: never reuse this link
                self.reusable = False
                data = data[: self._left]
            self._left -= len(data)
            self._emit(sink, data)
            if self._left == 0:
                self._finish()
        elif self._mode == 2:
            self._chunks(data, sink)
            self._whole = self._mode == 2 and not (self._left or self._line or self._trailers
                                                   or self._unchunk or self._prefix)
        elif self._mode == 3:
            self._emit(sink, data)

    def _emit(self, sink: asyncio.WriteTransport, data: bytes) -> None:
        # The head goes out with the first body bytes: one send() instead of two.
        if self._prefix:
            data, self._prefix = self._prefix + data, b""
        if data:
            sink.write(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.reusable = False
        self.transport = None
        if self._mode == 3:
            self._finish()  # a close-delimited answer ends here
        elif self._on_done is not None:
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
        raw = buf[:end]
        low = raw.lower()
        status = int(raw[9:12]) if raw[9:12].isdigit() else 0
        te = _header(low, b"transfer-encoding")
        chunked = te is not None and b"chunked" in te
        cl = _header(low, b"content-length")
        length = int(cl) if cl is not None and cl.isdigit() else None
        conn = _header(low, b"connection")
        if conn is not None and b"close" in conn:
            self.reusable = False
        if conn is None and not self._close_client and not self._unchunk:
            # The usual case: the head as it came, less the engine's own keep-alive
            # terms (its 5 s and 100 requests are not the front's).
            ka = low.find(b"\r\nkeep-alive:")
            if ka >= 0:
                eol = low.find(b"\r\n", ka + 2)
                raw = raw[:ka] + (raw[eol:] if eol >= 0 else b"")
            self._prefix = raw + b"\r\n\r\n"
        else:
            self._prefix = self._rewrite(raw, chunked)
        self.started = True
        rest = buf[end + 4 :]
        if status in (204, 304) or 100 <= status < 200 or (length == 0 and not chunked):
            self._emit(sink, b"")
            self._finish()
            return b""
        if chunked:
            self._mode = 2
        elif length is not None:
            self._mode, self._left = 1, length
        else:
            self._mode, self.reusable = 3, False
        return rest

    def _rewrite(self, raw: bytes, chunked: bool) -> bytes:
        # Hop-by-hop headers are the front's: the engine's Connection goes, the front's
        # own close (and, for an HTTP/1.0 client, unwrapped chunks) come in.
        lines = raw.split(b"\r\n")
        out = [lines[0]]
        for line in lines[1:]:
            lname = line.partition(b":")[0].strip().lower()
            if lname in _HOP and not (lname == b"transfer-encoding" and not self._unchunk):
                continue
            out.append(line)
        if self._close_client or (chunked and self._unchunk):
            out.append(b"Connection: close")
        return b"\r\n".join(out) + b"\r\n\r\n"

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
                    # llama.cpp's HTTP server closes the connection after a streamed
                    # answer: reusing it would only cost a failed try.
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
        self._emit(sink, data if pieces is None else b"".join(pieces))


class Exchange:
    """One request's trip to the engine and back, on a pooled connection.

    The fast path is plain callbacks (a kept-alive connection: write the request, relay
    the answer); only opening a connection needs a task. A reused connection the engine
    had closed before answering is replaced once by a fresh one (nothing reached the
    client, and the engine never saw the request).
    """

    def __init__(
        self, pool: EnginePool, sink: asyncio.WriteTransport, request: bytes, *,
        close_client: bool, unchunk: bool, on_done: Callable[[InfersightError | None], None],
    ) -> None:
        self.pool, self.sink, self.request = pool, sink, request
        self.close_client, self.unchunk, self.on_done = close_client, unchunk, on_done
        self.relay: Relay | None = None
        self.aborted = False
        #: Whether part of the answer reached the client (then it cannot be retried).
        self.started = False
        self._fresh = False
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        relay = self.pool.take()
        if relay is None:
            self._open()
        else:
            self._begin(relay)

    def _open(self) -> None:
        self._fresh = True
        self._task = asyncio.get_running_loop().create_task(self._connect())

    async def _connect(self) -> None:
        try:
            relay = await self.pool.connect()
        except ConnectError as e:
            if not self.aborted:
                self.on_done(e)
            return
        if self.aborted:
            self.pool.give_back(relay)
        else:
            self._begin(relay)

    def _begin(self, relay: Relay) -> None:
        self.relay = relay
        relay.begin(self.sink, self.request, close_client=self.close_client,
                    unchunk=self.unchunk, on_done=self._relayed)

    def _relayed(self, error: InfersightError | None) -> None:
        relay, self.relay = self.relay, None
        if relay is not None:
            self.started = relay.started
            self.pool.give_back(relay)
        if self.aborted:
            return
        if isinstance(error, ReadError) and not self.started and not self._fresh:
            self._open()  # a stale kept-alive connection: once more on a new one
            return
        self.on_done(error)

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
    """Kept-alive connections to the engine on loopback, reused newest first.

    llama.cpp's HTTP server closes a connection after each streamed answer. When one
    goes and none is left idle, the pool opens the next one at once (one at a time), so
    the next request does not wait for a connect before its first token.
    """

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self._idle: list[Relay] = []
        self._closed = False
        self._spare: asyncio.Task[None] | None = None

    async def connect(self) -> Relay:
        loop = asyncio.get_running_loop()
        try:
            _, relay = await loop.create_connection(Relay, self.host, self.port)
        except OSError as e:
            raise ConnectError(f"the engine is not reachable: {e.strerror or e}") from None
        return relay

    def take(self) -> Relay | None:
        """An idle connection that is still fresh enough to reuse, or None."""
        now = time.monotonic()
        while self._idle:
            relay = self._idle.pop()
            t = relay.transport
            if t is not None and not t.is_closing() and now - relay.idle_since < _REUSE_IDLE_S:
                return relay
            if t is not None:
                t.close()
        return None

    def give_back(self, relay: Relay) -> None:
        t = relay.transport
        if self._closed or not relay.reusable or t is None or t.is_closing():
            if t is not None:
                t.close()
            if not self._closed and not self._idle and self._spare is None:
                self._spare = asyncio.get_running_loop().create_task(self._open_spare())
            return
        relay.idle_since = time.monotonic()
        self._idle.append(relay)

    async def _open_spare(self) -> None:
        try:
            relay = await self.connect()
        except ConnectError:
            return  # the next request meets it, and says so
        finally:
            self._spare = None
        if self._closed and relay.transport is not None:
            relay.transport.close()
        elif not self._closed:
            self._idle.append(relay)

    def close(self) -> None:
        self._closed = True
        if self._spare is not None:
            self._spare.cancel()
            self._spare = None
        for relay in self._idle:
            if relay.transport is not None:
                relay.transport.close()
        self._idle.clear()

    def stats(self) -> dict[str, Any]:
        return {"idle_connections": len(self._idle)}
