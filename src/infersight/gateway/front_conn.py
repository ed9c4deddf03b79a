"""One client connection to the serve front: framing, timeouts, and the relay.

Everything on a request's path is a plain callback (no task, no future): bytes in,
head parsed (:mod:`~infersight.gateway.front_http`), body gathered, the front decides,
the engine's answer relayed (:mod:`~infersight.gateway.front_relay`), next request.
Requests on a connection are answered in order, one at a time. The connection is in
one of four states, and the front's timer closes it when a state lasts too long:

- idle (between requests): closed after the keep-alive timeout, without an answer
  (before the first request: after the header timeout, as nginx does);
- head (part of a request head arrived): 408 after the header timeout;
- body (the head is in, the body is not): 408 when no byte came for the body timeout
  (nginx's ``client_body_timeout``);
- busy (the engine is answering): no client timeout; the engine's time is the client's
  business.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, cast

from infersight.core.errors import ConnectError, InfersightError, InvalidRequest, RateLimited
from infersight.core.httpguard import SlowClient
from infersight.gateway.errors import InputError
from infersight.gateway.framing import raw_error
from infersight.gateway.front_http import MAX_HEAD_BYTES, ChunkDecoder, Head, parse_head
from infersight.gateway.front_relay import Exchange

if TYPE_CHECKING:
    from infersight.gateway.front import ServeFront

__all__ = ["ClientConn"]

log = logging.getLogger("infersight.serve")

IDLE, HEAD, BODY, BUSY = range(4)
_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
#: Seconds a closed connection keeps dropping the client's bytes (see ClientConn.close).
_LINGER_S = 2.0


class ClientConn(asyncio.Protocol):
    """The front's protocol for one client connection."""

    def __init__(self, front: ServeFront) -> None:
        self.front = front
        self.transport: asyncio.Transport | None = None
        self.state = IDLE
        now = front.loop.time()
        self.since = now  # when the current state began
        self.last_read = now
        self.peer = ""
        self.closed = False
        self._buf = bytearray()
        self._pos = 0
        self._head: Head | None = None
        self._chunks: ChunkDecoder | None = None
        self._exchange: Exchange | None = None
        self._close_after = False
        self._eof = False
        self._answered = 0

    # -- asyncio.Protocol ------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        self.peer = str(peer[0]) if isinstance(peer, tuple) and peer else ""
        if not self.front.admit(self):
            cap = self.front.cfg.guard.max_connections_per_client
            self.send_error(RateLimited(
                f"too many connections from this address (at most {cap})", status=429
            ), close=True)

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return  # after a refusal: the rest of what the client sends is dropped
        now = self.front.loop.time()
        self.last_read = now
        if self.state == IDLE:
            self.state, self.since = HEAD, now
            if not self._buf and self._whole(data):
                return
        self._buf += data
        if self.state != BUSY:
            self._advance()

    def eof_received(self) -> bool:
        self._eof = True
        if self.closed:  # lingering: the client has finished too
            self._shut()
            return False
        if self.state in (HEAD, BODY):
            self._advance()  # whole requests still buffered are answered first
        if not self.closed and self.state in (HEAD, BODY):
            where = "head" if self.state == HEAD else "body"
            self.send_error(InputError(
                f"the connection closed inside a request {where}", code="malformed_http"
            ), close=True)
        elif self.state == IDLE:
            self._shut()
        return True  # busy: keep our side open for the answer

    def connection_lost(self, exc: BaseException | None) -> None:
        self.closed = True
        self.transport = None
        self.front.forget(self)
        if self._exchange is not None:
            self._exchange.abort()
            self._exchange = None

    def pause_writing(self) -> None:
        if self._exchange is not None:
            self._exchange.pause_client(True)

    def resume_writing(self) -> None:
        if self._exchange is not None:
            self._exchange.pause_client(False)

    # -- requests ------------------------------------------------------------------------------
    def _advance(self) -> None:
        """Take complete requests off the buffer and answer them, until one is busy."""
        try:
            while not self.closed and self.state != BUSY:
                if self._head is None:
                    got = self._next_head()
                    if got is None:
                        return
                    if not got:
                        continue  # refused from its head alone, and answered
                body = self._next_body()
                if body is None:
                    return
                head, self._head, self._chunks = self._head, None, None
                assert head is not None
                self.state = BUSY
                self.front.on_request(self, head, body)
        except InvalidRequest as e:
            self.send_error(e, close=True)
        finally:
            if self._pos and (self._pos == len(self._buf) or self._pos > 65536):
                del self._buf[: self._pos]
                self._pos = 0

    def _whole(self, data: bytes) -> bool:
        """The usual read: exactly one whole request (a head and its Content-Length
        body), with nothing buffered before it. Taken straight from ``data``, in fewer
        steps than the buffered path (each step costs microseconds when a request
        arrives after an engine step has evicted the front from the CPU's caches).
        False, having done nothing, for anything else: the buffered path takes it."""
        end = data.find(b"\r\n\r\n")
        if end <= 0 or end > MAX_HEAD_BYTES:
            return False
        try:
            head = parse_head(data[:end])
        except InvalidRequest:
            return False  # the buffered path refuses it, with the same error
        if head.chunked or end + 4 + head.length != len(data) or "expect" in head.headers:
            return False
        refusal = self.front.check_head(head)
        if refusal is not None:
            self._refuse(head, refusal)
            return True
        self.state = BUSY
        self.front.on_request(self, head, data[end + 4 :])
        return True

    def _refuse(self, head: Head, refusal: InfersightError) -> None:
        self.send_error(refusal, close=head.has_body or head.close,
                        head_only=head.method == "HEAD",
                        headers=self.front.allow_header(refusal, head))
        self._after_answer(keep=not (head.has_body or head.close), resume=False)

    def _next_head(self) -> bool | None:
        """True: a head is ready for its body; False: refused (answered); None: wait."""
        buf, pos = self._buf, self._pos
        while buf.startswith(b"\r\n", pos):  # RFC 9112 2.2: blank lines before a request
            pos += 2
        self._pos = pos
        if pos == len(buf):
            return None
        end = buf.find(b"\r\n\r\n", pos)
        if end < 0:
            if len(buf) - pos > MAX_HEAD_BYTES:
                raise InputError("request head too large", code="header_too_large",
                                 status=431)
            if buf.find(b"\n\n", pos) >= 0 or buf.find(b"\n\r\n", pos) >= 0:
                raise InputError("malformed HTTP request: lines must end with CRLF",
                                 code="malformed_http")
            return None
        if end - pos > MAX_HEAD_BYTES:
            raise InputError("request head too large", code="header_too_large", status=431)
        head = parse_head(bytes(buf[pos:end]))
        self._pos = end + 4
        self.state, self.since = (BODY if head.has_body else HEAD), self.front.loop.time()
        refusal = self.front.check_head(head)
        if refusal is not None:
            self._refuse(head, refusal)
            return False
        if head.has_body and head.headers.get("expect") and self.transport is not None:
            self.transport.write(_CONTINUE)
        self._head = head
        self._chunks = ChunkDecoder(self.front.cfg.max_body_bytes) if head.chunked else None
        return True

    def _next_body(self) -> bytes | None:
        head = self._head
        assert head is not None
        if self._chunks is not None:
            self._pos += self._chunks.feed(self._buf, self._pos)
            return self._chunks.body() if self._chunks.done else None
        if len(self._buf) - self._pos < head.length:
            return None
        body = bytes(self._buf[self._pos : self._pos + head.length])
        self._pos += head.length
        return body

    # -- answers -------------------------------------------------------------------------------
    def relay(self, request: bytes, head: Head) -> None:
        """Send ``request`` to the engine and its answer to the client."""
        assert self.transport is not None
        unchunk = head.minor == 0  # an HTTP/1.0 client cannot read chunks
        self._close_after = head.close or unchunk
        ex = self._exchange = Exchange(
            self.front.pool, self.transport, request, close_client=self._close_after,
            unchunk=unchunk, on_done=self._relayed,
        )
        ex.start()

    def _relayed(self, error: InfersightError | None) -> None:
        ex, self._exchange = self._exchange, None
        if self.closed or ex is None:
            return
        if error is None:
            self._after_answer(keep=not self._close_after)
        elif ex.started:
            self.close()  # part of the answer is out: cutting it is the only signal left
        else:
            if not isinstance(error, ConnectError):
                log.warning("serve front: %s", error)
            self.send_error(error, close=self._close_after)
            self._after_answer(keep=not self._close_after)

    def answered(self, e: InfersightError, head: Head) -> None:
        """Refuse a request whose body was read in full (keep-alive unless asked not to)."""
        self.send_error(e, close=head.close, head_only=head.method == "HEAD")
        self._after_answer(keep=not head.close, resume=False)

    def _after_answer(self, *, keep: bool, resume: bool = True) -> None:
        self._answered += 1
        if not keep:
            self.close()
            return
        self.state = HEAD if self._pos < len(self._buf) else IDLE
        self.since = self.front.loop.time()
        if self._eof and self.state == IDLE:
            self._shut()
        elif resume and self.state == HEAD:
            self.front.loop.call_soon(self._advance)  # a pipelined request is waiting

    def send_error(
        self, e: InfersightError, *, close: bool, head_only: bool = False,
        headers: dict[str, str] | None = None,
    ) -> None:
        t = self.transport
        if t is None or t.is_closing():
            return
        t.write(raw_error(e, close=close, head_only=head_only, headers=headers))
        if close:
            self.close()

    def close(self) -> None:
        """Close after what was written. A client still sending (a refused body) would
        get a reset that can destroy the answer in its receive buffer, so the front
        first ends its own side and drops the client's bytes for a moment (nginx's
        lingering close)."""
        self.closed = True
        t = self.transport
        if t is None or t.is_closing():
            return
        if self._eof or not t.can_write_eof():
            t.close()
            return
        t.write_eof()
        self.front.loop.call_later(_LINGER_S, self._shut)

    def _shut(self) -> None:
        self.closed = True
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    def check_timeouts(self, now: float) -> None:
        """Called by the front's timer: close connections that waited too long."""
        cfg = self.front.cfg.guard
        if self.closed:
            return
        if self.state == IDLE:
            # A new connection waits for its first request as long as for a head.
            limit = cfg.idle_timeout_s if self._answered else cfg.head_timeout_s
            if now - self.since > limit:
                self._shut()
        elif self.state == HEAD and now - self.since > cfg.head_timeout_s:
            self.send_error(SlowClient(
                f"request head not received within {cfg.head_timeout_s:g} s"
            ), close=True)
        elif self.state == BODY and now - self.last_read > cfg.body_timeout_s:
            self.send_error(SlowClient(
                f"request body stalled for {cfg.body_timeout_s:g} s"
            ), close=True)
