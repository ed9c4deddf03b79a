"""The gateway's listening side: aiohttp's HTTP server with the limits a public server
needs, on aiohttp's public API.

aiohttp parses every request (llhttp; never a parser of ours, docs/design.md section
4) and keeps what one connection holds bounded by its flow control: a body is read in
``read_bufsize`` pieces, pipelined requests pause reading when its queue is full, and
an answer the client does not read waits on the socket's buffer. Its documented
limits are set from :class:`ClientLimits`: request line, header and header-count
sizes, the read buffer, the time spent draining an unread body (``lingering_time``).

What aiohttp leaves open is added per connection by :class:`Connection`, aiohttp's
``web.RequestHandler`` with public protocol methods extended:

- **connections per client address**: one over the cap is answered 429 at once and
  closed (after a lingering moment, so the answer is read, not reset);
- **the head time limit** (nginx ``client_header_timeout``): a request head must be
  whole within ``head_timeout_s`` of its first byte (of the connection's start for a
  new connection): a partial head is answered 408, a silent connection just closed;
- **the keep-alive time limit**: an idle connection is closed after
  ``keepalive_timeout_s`` (aiohttp's own timer is kept as a backstop behind it);
- **end-of-file from the client** means it left (as for nginx and aiohttp): a request
  in progress is cancelled, and with it its upstream work;
- **malformed framing** found by aiohttp's parser gets an OpenAI JSON 400 that never
  echoes the client's bytes (they may hold a key).

Rules about one request (its HTTP version, ``Transfer-Encoding``, ``Expect``, its
body's size and time limits) are :mod:`.request_guard`'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from infersight.core.listen import listen_error
from infersight.gateway.error_answers import json_error, raw_error

__all__ = ["ClientLimits", "Connection", "Listener"]

log = logging.getLogger("infersight.gateway")

#: How long a refused connection keeps dropping the client's bytes before it closes.
_LINGER_S = 2.0

#: aiohttp's parser errors by class name: (code, what is wrong). The exception's own
#: text quotes the client's bytes, so only its first line is ever shown.
_FRAMING = {
    "LineTooLong": ("header_too_large", "a request line or header is too long"),
    "BadHttpMethod": ("invalid_request_line", "invalid HTTP method"),
    "BadStatusLine": ("invalid_request_line", "invalid HTTP request line"),
    "InvalidURLError": ("invalid_request_line", "invalid request target"),
    "InvalidHeader": ("invalid_header", "invalid header"),
    "TransferEncodingError": ("invalid_body_framing", "invalid chunked body"),
    "ContentLengthError": ("invalid_body_framing", "body shorter than Content-Length"),
}


@dataclass(frozen=True, slots=True)
class ClientLimits:
    """What a client may make the server hold or wait for (seconds; 0 = no cap)."""

    head_timeout_s: float = 60.0
    body_timeout_s: float = 60.0
    keepalive_timeout_s: float = 75.0
    max_connections_per_client: int = 1024
    max_body_bytes: int = 8 * 1024 * 1024
    #: Called with a reason ("head_timeout", "body_timeout", "malformed",
    #: "connection_limit") for each refusal, to count it in /metrics.
    on_event: Callable[[str], None] | None = None
    #: Headers for the answers the listener writes itself (a request id...).
    headers: Callable[[], Mapping[str, str]] | None = None

    def event(self, reason: str) -> None:
        if self.on_event is not None:
            self.on_event(reason)

    def answer_headers(self) -> dict[str, str]:
        return dict(self.headers()) if self.headers is not None else {}


def framing_error(exc: BaseException | None) -> tuple[str, str]:
    """(code, message) for an error of aiohttp's request parser, without the client's
    bytes."""
    name = type(exc).__name__ if exc is not None else ""
    if name in _FRAMING:
        code, text = _FRAMING[name]
        return code, f"malformed HTTP request: {text}"
    lines = str(getattr(exc, "message", "") or "").strip().splitlines()
    detail = lines[0].split(" b'")[0].split(' b"')[0].rstrip(": ") if lines else ""
    return "malformed_request", "malformed HTTP request" + (f": {detail}" if detail else "")


class Listener:
    """Serves ``app`` on ``host:port`` with :class:`Connection` connections."""

    def __init__(self, app: web.Application, limits: ClientLimits) -> None:
        self.app = app
        self.limits = limits
        self.runner = web.AppRunner(app, handler_cancellation=True, access_log=None)
        self.per_client: Counter[str] = Counter()
        self.port: int | None = None
        self._server: asyncio.Server | None = None
        lim = limits
        #: aiohttp's documented limits for each connection (web.RequestHandler's).
        self.handler_kwargs: dict[str, Any] = {
            "access_log": None,
            "max_line_size": 8190,
            "max_field_size": 8190,
            "max_headers": 128,
            "read_bufsize": 2**16,
            # Time spent reading and dropping a body nobody read (a refused request)
            # before the connection closes.
            "lingering_time": min(10.0, lim.body_timeout_s),
            # Connection enforces keepalive_timeout_s itself (a head in progress is
            # given its head time); aiohttp's timer is a backstop behind it.
            "keepalive_timeout": lim.keepalive_timeout_s + lim.head_timeout_s + 1.0,
        }

    async def start(self, host: str, port: int) -> None:
        """Listen; raise ConfigError (one line) when the address cannot be used."""
        await self.runner.setup()
        loop = asyncio.get_running_loop()
        try:
            self._server = await loop.create_server(
                lambda: Connection(self), host, port, backlog=1024, reuse_address=True
            )
        except OSError as e:
            await self.runner.cleanup()
            raise listen_error(host, port, e) from None
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
        await self.runner.cleanup()  # the app's cleanup, then every connection closed
        if server is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(server.wait_closed(), 5.0)

    def admit(self, peer: str) -> bool:
        cap = self.limits.max_connections_per_client
        if cap and self.per_client[peer] >= cap:
            return False
        self.per_client[peer] += 1
        return True

    def forget(self, peer: str) -> None:
        self.per_client[peer] -= 1
        if self.per_client[peer] <= 0:
            del self.per_client[peer]


class Connection(web.RequestHandler):
    """aiohttp's protocol for one client connection, with the listener's limits.

    The connection is busy while a request is handled (:mod:`.request_guard` calls
    :meth:`request_started` and :meth:`request_ended`); between requests it waits,
    for a head's bytes or for the idle limit, on one timer.
    """

    __slots__ = (
        "guard_body",
        "guard_busy",
        "guard_counted",
        "guard_head",
        "guard_listener",
        "guard_peer",
        "guard_refused",
        "guard_served",
        "guard_timer",
        "guard_wait_from",
    )

    def __init__(self, listener: Listener) -> None:
        server = listener.runner.server
        assert server is not None
        super().__init__(server, loop=asyncio.get_running_loop(), **listener.handler_kwargs)
        self.guard_listener = listener
        self.guard_peer = "-"
        self.guard_counted = False
        self.guard_refused = False
        self.guard_busy = False
        self.guard_served = False
        #: Bytes of a request head arrived since the last request started.
        self.guard_head = False
        #: The body of the request handled last (its bytes are not a head's).
        self.guard_body: Any = None
        self.guard_wait_from = 0.0
        self.guard_timer: asyncio.TimerHandle | None = None

    # -- the connection -------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        peer = transport.get_extra_info("peername")
        self.guard_peer = str(peer[0]) if isinstance(peer, tuple) and peer else "-"
        lst = self.guard_listener
        if not lst.admit(self.guard_peer):
            self.guard_refuse(transport)
            return
        self.guard_counted = True
        super().connection_made(transport)
        self.guard_wait_from = asyncio.get_running_loop().time()
        self.guard_arm(lst.limits.head_timeout_s)

    def guard_refuse(self, transport: asyncio.BaseTransport) -> None:
        """Over the per-address cap: a 429 at once, then a lingering close."""
        lim = self.guard_listener.limits
        lim.event("connection_limit")
        self.guard_refused = True
        t: Any = transport
        t.write(
            raw_error(
                429,
                f"too many connections from {self.guard_peer} (limit "
                f"{lim.max_connections_per_client}); reuse keep-alive connections",
                "too_many_connections",
                etype="rate_limit_error",
                headers={"Retry-After": "1", **lim.answer_headers()},
            )
        )
        if t.can_write_eof():
            t.write_eof()
        self.guard_timer = asyncio.get_running_loop().call_later(_LINGER_S, t.close)

    def connection_lost(self, exc: BaseException | None) -> None:
        self.guard_disarm()
        if self.guard_counted:
            self.guard_counted = False
            self.guard_listener.forget(self.guard_peer)
        if not self.guard_refused:
            super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self.guard_refused:
            return
        if data and not self.guard_head:
            body = self.guard_body
            if body is None or body.is_eof():
                self.guard_head = True
                if self.guard_served and not self.guard_busy:
                    # An idle kept-alive connection: the head's clock starts now.
                    self.guard_wait_from = asyncio.get_running_loop().time()
                    self.guard_arm(self.guard_listener.limits.head_timeout_s)
        super().data_received(data)

    # -- requests (called by request_guard) ------------------------------------------
    def request_started(self, body: Any) -> None:
        self.guard_disarm()
        self.guard_busy = True
        self.guard_head = False
        self.guard_body = body

    def request_ended(self) -> None:
        self.guard_busy = False
        self.guard_served = True
        self.guard_wait_from = asyncio.get_running_loop().time()
        lim = self.guard_listener.limits
        self.guard_arm(lim.head_timeout_s if self.guard_head else lim.keepalive_timeout_s)

    # -- the one timer --------------------------------------------------------------
    def guard_arm(self, delay: float) -> None:
        self.guard_disarm()
        self.guard_timer = asyncio.get_running_loop().call_later(delay, self.guard_expired)

    def guard_disarm(self) -> None:
        if self.guard_timer is not None:
            self.guard_timer.cancel()
            self.guard_timer = None

    def guard_expired(self) -> None:
        self.guard_timer = None
        t = self.transport
        if self.guard_busy or t is None or t.is_closing():
            return
        if t.get_write_buffer_size():
            self.guard_arm(1.0)  # the last answer is still going out
            return
        lim = self.guard_listener.limits
        limit = (
            lim.head_timeout_s
            if self.guard_head or not self.guard_served
            else (lim.keepalive_timeout_s)
        )
        left = self.guard_wait_from + limit - asyncio.get_running_loop().time()
        if left > 0:
            self.guard_arm(left)
            return
        if self.guard_head:
            lim.event("head_timeout")
            t.write(
                raw_error(
                    408,
                    f"request head timed out: not complete after {lim.head_timeout_s:g} s",
                    "request_timeout",
                    headers=lim.answer_headers(),
                )
            )
        self.force_close()

    # -- errors aiohttp answers itself ----------------------------------------------
    def handle_error(
        self,
        request: web.BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        """aiohttp's own error answers (framing errors, a crashed handler) as OpenAI JSON."""
        self.guard_disarm()
        lim = self.guard_listener.limits
        if status >= 500:
            self.log_exception("Error handling request from %s", self.guard_peer, exc_info=exc)
            code, text, etype = "internal_error", "internal server error", "server_error"
        else:
            log.debug("malformed request from %s: %r", self.guard_peer, exc)
            lim.event("malformed")
            (code, text), etype = framing_error(exc), "invalid_request_error"
        if request.writer.output_size > 0:
            raise ConnectionError("the response had started: no error answer can follow")
        resp = json_error(status, text, code, headers=lim.answer_headers(), etype=etype)
        resp.force_close()
        return resp
