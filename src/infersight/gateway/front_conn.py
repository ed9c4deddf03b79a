"""One client connection to the serve front: request framing, timeouts and the relay.

Requests are parsed by aiohttp's C HTTP parser, the same one the gateway's server
uses, so both refuse the same malformed framing; this connection answers the refusal
with an OpenAI JSON error instead of aiohttp's text page. Requests on a connection are
answered in order, one at a time. The connection is in one of four states, and the
front's timer closes it when a state lasts too long:

- idle (between requests): closed after the keep-alive timeout, without an answer
  (before the first request: after the header timeout, as nginx does);
- head (part of a request head arrived): 408 after the header timeout;
- body (the head is in, the body is not): 408 when no body byte came for the body
  timeout (nginx's ``client_body_timeout``);
- busy (validating, or relaying the engine's answer): no client timeout; the engine's
  own time is the client's business.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from typing import TYPE_CHECKING, Any

from aiohttp.base_protocol import BaseProtocol
from aiohttp.http import HttpRequestParser, RawRequestMessage
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.streams import StreamReader

from infersight.core.errors import ConnectError, InfersightError, RateLimited, ReadError
from infersight.gateway.errors import InputError
from infersight.gateway.framing import framing_error, raw_error
from infersight.gateway.front_relay import EngineLink

if TYPE_CHECKING:
    from infersight.gateway.front import ServeFront

__all__ = ["ClientConn"]

log = logging.getLogger("infersight.serve")

IDLE, HEAD, BODY, BUSY = range(4)
#: Requests parsed ahead of the one being answered before the client is cut off.
_MAX_PIPELINED = 32
_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
#: Seconds a closed connection keeps dropping the client's bytes (see ClientConn.close).
_LINGER_S = 2.0


class _BodyEnded(Exception):
    """The client closed its side in the middle of a request body."""


class ClientConn(BaseProtocol):
    """The front's protocol for one client connection."""

    def __init__(self, front: ServeFront) -> None:
        super().__init__(front.loop)
        self.front = front
        self.state = IDLE
        now = front.loop.time()
        self.since = now  # when the current state began
        self.last_read = now
        self.peer = ""
        self._queue: collections.deque[tuple[RawRequestMessage, StreamReader]] = (
            collections.deque()
        )
        self._payload: StreamReader | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._broken: InputError | None = None
        self._bytes_while_busy = False
        self._answered = 0
        self._eof = False
        self._upgraded = False
        self.closed = False
        self._link: EngineLink | None = None
        self._task: asyncio.Task[None] | None = None
        self._parser: HttpRequestParser | None = None

    # -- asyncio.Protocol ------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        peer = transport.get_extra_info("peername")
        self.peer = str(peer[0]) if isinstance(peer, tuple) and peer else ""
        if not self.front.admit(self):
            cap = self.front.cfg.max_connections_per_client
            self.send_error(
                RateLimited(f"too many connections from this address (at most {cap})",
                            status=429),
                close=True,
            )  # fmt: skip
            return
        self._parser = HttpRequestParser(
            self, self.front.loop, 2**16, max_line_size=8190, max_field_size=8190,
            payload_exception=_BodyEnded, auto_decompress=False,
        )  # fmt: skip
        self._task = self.front.loop.create_task(self._serve())

    def data_received(self, data: bytes) -> None:
        if self.closed or self._parser is None or self._upgraded:
            return  # after a refusal: the rest of what the client sends is dropped
        now = self.front.loop.time()
        self.last_read = now
        if self.state == IDLE:
            self.state, self.since = HEAD, now
        elif self.state == BUSY:
            self._bytes_while_busy = True
        try:
            msgs, upgraded, _ = self._parser.feed_data(data)
        except HttpProcessingError as e:
            self._broken = framing_error(e)
            self._wake()
            return
        if upgraded:
            self._upgraded = True  # no protocol switch here: answer, then close
        if msgs:
            self._queue.extend(msgs)
            self._payload = msgs[-1][1]
            if len(self._queue) > _MAX_PIPELINED:
                self._broken = InputError("too many pipelined requests", code="too_many_requests")
            self._wake()
        p = self._payload
        if p is not None and not p.is_eof() and p.total_bytes > self.front.cfg.max_body_bytes:
            self._payload = None
            self._too_large()

    def eof_received(self) -> bool:
        self._eof = True
        if self.closed:  # lingering: the client has finished too
            if self.transport is not None:
                self.transport.close()
            return False
        p = self._payload
        if p is not None and not p.is_eof():
            p.set_exception(_BodyEnded())
        self._wake()
        return True  # keep our side open for the answer

    def connection_lost(self, exc: BaseException | None) -> None:
        super().connection_lost(exc)
        self.closed = True
        self.front.forget(self)
        if self._link is not None:
            self._link.abort()
        if self._task is not None and not self._task.done():
            self._task.cancel()

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._link is not None:
            self._link.pause_client(True)

    def resume_writing(self) -> None:
        super().resume_writing()
        if self._link is not None:
            self._link.pause_client(False)

    # -- writing -----------------------------------------------------------------------------
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
        self.front.loop.call_later(_LINGER_S, t.close)

    def _too_large(self) -> None:
        cap = self.front.cfg.max_body_bytes
        e = InputError(f"request body exceeds {cap} bytes", code="body_too_large", status=413)
        if self.state == BUSY and self._link is not None:
            self.close()  # an answer is being relayed: no room for ours
        else:
            self.send_error(e, close=True)

    def check_timeouts(self, now: float) -> None:
        """Called by the front's timer: close connections that waited too long."""
        cfg = self.front.cfg
        if self.state == IDLE:
            # A new connection waits for its first request as long as for a head.
            limit = cfg.keepalive_timeout_s if self._answered else cfg.header_timeout_s
            if now - self.since > limit:
                self.close()
        elif self.state == HEAD and now - self.since > cfg.header_timeout_s:
            self.send_error(InputError(
                f"request head not received within {cfg.header_timeout_s:g} s",
                code="request_timeout", status=408,
            ), close=True)  # fmt: skip
        elif self.state == BODY and now - self.last_read > cfg.body_timeout_s:
            self.send_error(InputError(
                f"request body stalled for {cfg.body_timeout_s:g} s",
                code="request_timeout", status=408,
            ), close=True)  # fmt: skip

    # -- the request loop ----------------------------------------------------------------
    def _wake(self) -> None:
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    async def _serve(self) -> None:
        try:
            while not self.closed:
                item = await self._next()
                if item is None:
                    break
                keep = await self.front.handle(self, *item)
                self._answered += 1
                if not keep or self._upgraded:
                    break
                busy_bytes, self._bytes_while_busy = self._bytes_while_busy, False
                self.state = HEAD if busy_bytes and not self._queue else IDLE
                self.since = self.front.loop.time()
        except asyncio.CancelledError:
            pass  # the connection is gone
        except Exception:  # a bug must cost one connection, never the front
            log.exception("serve front: unexpected error on a client connection")
        finally:
            self.close()

    async def _next(self) -> tuple[RawRequestMessage, StreamReader] | None:
        while not self._queue:
            if self._broken is not None:
                self.send_error(self._broken, close=True)
                return None
            if self._eof or self.closed:
                if self._eof and self.state == HEAD:
                    self.send_error(InputError(
                        "the connection closed inside a request head", code="malformed_http"
                    ), close=True)  # fmt: skip
                return None
            self._waiter = self.front.loop.create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        msg, payload = self._queue.popleft()
        self.state, self.since = (BUSY if payload.is_eof() else BODY), self.front.loop.time()
        return msg, payload

    async def read_body(self, msg: RawRequestMessage, payload: StreamReader) -> bytes:
        """The whole body (100-continue answered); the state is busy afterwards."""
        t = self.transport
        if t is not None and not payload.is_eof() and msg.headers.get("Expect") is not None:
            t.write(_CONTINUE)  # other expectations were refused with the head
        self.last_read = self.front.loop.time()
        try:
            body = await payload.read()
        except _BodyEnded:
            raise InputError(
                "the connection closed before the request body was complete",
                code="malformed_http",
            ) from None
        self.state = BUSY
        return body

    async def relay(self, request: list[bytes], *, close: bool, unchunk: bool) -> bool:
        """Send ``request`` to the engine and its answer to the client; keep-alive?"""
        t = self.transport
        assert t is not None
        link = self._link = EngineLink()
        try:
            await self.front.pool.exchange(
                link, t, request, close_client=close or unchunk, unchunk=unchunk
            )
        except ConnectError as e:
            self.send_error(e, close=close)
            return not close
        except ReadError as e:
            if link.aborted or self.closed or link.started:
                return False  # the client left, or part of the answer is out: cut
            log.warning("serve front: %s", e)
            self.send_error(e, close=close)
            return not close
        finally:
            self._link = None
        return not (close or unchunk)

    def stats(self) -> dict[str, Any]:
        return {"peer": self.peer, "state": self.state}
