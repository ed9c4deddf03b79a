"""Hardening shared by the project's HTTP servers (the gateway; the engine's front).

aiohttp reads a request head and body for as long as the client takes, keeps a
connection that never sends anything, lets one address open any number of
connections, and answers malformed framing with a plain-text 400. A
:class:`GuardedRunner` (an ``aiohttp.web.AppRunner``) fixes that one level below the
application, in the connection protocol:

- **head timeout** (nginx ``client_header_timeout``, 60 s): the request head must be
  whole within this many seconds of its first byte (of the connection's start for a
  new connection); a partial head is answered 408, a silent connection just closed.
- **body timeout** (nginx ``client_body_timeout``, 60 s): the longest gap between two
  reads of a request body; the handler's ``request.read()`` raises :class:`SlowClient`
  (a 408), and the connection closes after the answer.
- **idle timeout** (nginx ``keepalive_timeout``, 75 s): an idle keep-alive connection
  is closed (aiohttp's own keep-alive timer).
- **connections per client address**: one over the cap gets a 429 as soon as its
  head arrives, then the connection closes.
- **malformed framing** (garbage request line, bad or negative Content-Length,
  oversize line or header, bad chunk size, even in the middle of a body): an OpenAI
  JSON 400 instead of aiohttp's text, with no byte of the client's request echoed back
  (it may hold a key).

Every error body is ``{"error": {"message", "type", "code", "param"}}``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from itertools import islice
from typing import Any

import orjson
from aiohttp import http_exceptions, web
from aiohttp.http_parser import RawRequestMessage
from aiohttp.web_protocol import RequestHandler

from infersight.core.errors import BadRequest

__all__ = [
    "GuardSettings",
    "GuardedRunner",
    "MalformedRequest",
    "SlowClient",
    "json_error",
    "openai_error_body",
    "raw_json_response",
]

log = logging.getLogger("infersight.http")


@dataclass(frozen=True, slots=True)
class GuardSettings:
    """Limits on what a client may make a server wait for (seconds; 0 = no cap)."""

    head_timeout_s: float = 60.0
    body_timeout_s: float = 60.0
    idle_timeout_s: float = 75.0
    max_connections_per_client: int = 256
    #: Called with a reason ("head_timeout", "body_timeout", "malformed",
    #: "connection_limit") for each refusal, e.g. to count it in /metrics.
    on_event: Callable[[str], None] | None = None
    #: Extra headers for the guard's own answers (a server's X-Request-Id...).
    headers: Callable[[], Mapping[str, str]] | None = None


class SlowClient(BadRequest):
    """The client took longer than the head or body timeout (408)."""

    code = "request_timeout"

    def __init__(self, message: str) -> None:
        super().__init__(message, status=408)


class MalformedRequest(BadRequest):
    """The request's HTTP framing is invalid (400)."""

    code = "malformed_request"

    def __init__(self, message: str) -> None:
        super().__init__(message, status=400)


def openai_error_body(
    message: str, *, code: str, etype: str = "invalid_request_error", param: str | None = None
) -> dict[str, Any]:
    """``{"error": {"message", "type", "code", "param"}}``."""
    return {"error": {"message": message, "type": etype, "code": code, "param": param}}


def json_error(
    status: int, message: str, code: str, *, headers: Mapping[str, str] | None = None,
    etype: str = "invalid_request_error",
) -> web.Response:
    """An OpenAI-style JSON error response."""
    return web.Response(
        status=status, body=orjson.dumps(openai_error_body(message, code=code, etype=etype)),
        content_type="application/json", headers=headers,
    )


#: What a framing error means, by aiohttp's exception (the exception's own text quotes
#: the client's bytes, which may hold a key, so it is never echoed).
_FRAMING = (
    (http_exceptions.LineTooLong, "header_too_large", "a request line or header is too long"),
    (http_exceptions.BadHttpMethod, "invalid_request_line", "invalid HTTP method"),
    (http_exceptions.BadStatusLine, "invalid_request_line", "invalid HTTP request line"),
    (http_exceptions.InvalidURLError, "invalid_request_line", "invalid request target"),
    (http_exceptions.InvalidHeader, "invalid_header", "invalid header"),
    (http_exceptions.TransferEncodingError, "invalid_body_framing", "invalid chunked body"),
    (http_exceptions.ContentLengthError, "invalid_body_framing", "body shorter than Content-Length"),
)


def _framing(exc: BaseException | None) -> tuple[str, str]:
    """(code, message) for a framing error, without the client's bytes."""
    for cls, code, text in _FRAMING:
        if isinstance(exc, cls):
            return code, f"malformed HTTP request: {text}"
    detail = ""
    if isinstance(exc, http_exceptions.HttpProcessingError) and exc.message:
        first = str(exc.message).strip().splitlines()[0]
        detail = first.split(" b'")[0].split(' b"')[0].rstrip(": ")
    return "malformed_request", "malformed HTTP request" + (f": {detail}" if detail else "")


def raw_json_response(
    status: int, body: dict[str, Any], headers: Mapping[str, str] | None = None, *,
    close: bool = True, head_only: bool = False,
) -> bytes:
    """A whole HTTP/1.1 JSON response as bytes, for servers that write to the transport
    themselves (no request object, as on a head timeout; the serve front). ``close``
    adds ``Connection: close``; ``head_only`` leaves the body out (answers to HEAD)."""
    data = orjson.dumps(body)
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = "Error"
    lines = [f"HTTP/1.1 {status} {phrase}", "Content-Type: application/json",
             f"Content-Length: {len(data)}", *(["Connection: close"] if close else []),
             *(f"{k}: {v}" for k, v in (headers or {}).items())]
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return head if head_only else head + data


def _raw(status: int, body: dict[str, Any], headers: Mapping[str, str]) -> bytes:
    """A whole HTTP/1.1 response that closes the connection."""
    return raw_json_response(status, body, headers)


class _GuardedHandler(RequestHandler):
    """aiohttp's connection protocol with the guard's timeouts, cap and JSON errors."""

    def __init__(self, manager: _GuardedServer, **kwargs: Any) -> None:
        super().__init__(manager, **kwargs)
        self._guard = manager.guard
        self._client: str | None = None
        self._head_at: float | None = None
        self._head_bytes = False
        self._payload: Any = None
        self._body_at = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = float("inf")

    # -- connection -------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        server: _GuardedServer = self._manager  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        self._client = str(peer[0]) if isinstance(peer, tuple) and peer else "-"
        cap = self._guard.max_connections_per_client
        if server.opened(self._client) > cap > 0:
            self._request_handler = self._refuse
        super().connection_made(transport)
        self._head_at = time.monotonic()  # a new connection has this long to send a head
        self._arm(self._head_at + self._guard.head_timeout_s)

    def connection_lost(self, exc: BaseException | None) -> None:
        if self._client is not None:
            server = self._manager
            if isinstance(server, _GuardedServer):
                server.closed(self._client)
            self._client = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        super().connection_lost(exc)

    async def _refuse(self, request: web.BaseRequest) -> web.StreamResponse:
        self._event("connection_limit")
        resp = json_error(
            429, f"too many connections from {self._client} (limit "
            f"{self._guard.max_connections_per_client}); reuse keep-alive connections",
            "too_many_connections", headers=self._headers(),
            etype="rate_limit_error",
        )
        resp.headers["Retry-After"] = "1"
        resp.force_close()
        return resp

    # -- reading ----------------------------------------------------------------------
    def data_received(self, data: bytes) -> None:
        if self._force_close or self._close:
            return
        payload = self._payload
        in_body = payload is not None and not payload.is_eof()
        first = len(self._messages)
        super().data_received(data)
        if not data and len(self._messages) == first:
            return  # aiohttp re-parsing its buffer: nothing arrived
        now = time.monotonic()
        for msg, body in list(islice(self._messages, first, None)):
            if isinstance(msg, RawRequestMessage):
                self._head_at, self._head_bytes = None, False
                self._payload, self._body_at = body, now
            elif in_body:
                # A framing error inside a body (a bad chunk size): the handler waits
                # on that body, so fail its read rather than queue a second answer.
                self._messages.remove((msg, body))
                self._fail_body(MalformedRequest(_framing(getattr(msg, "exc", None))[1]))
                self._event("malformed")
        if in_body:
            self._body_at = now
        elif data and len(self._messages) == first:
            self._head_bytes = True  # part of a head, not yet whole
            if self._head_at is None:
                self._head_at = now
                self._arm(now + self._guard.head_timeout_s)
        if self._payload is not None and not self._payload.is_eof():
            self._arm(self._body_at + self._guard.body_timeout_s)

    def _process_keepalive(self) -> None:
        if self._head_bytes:
            # A head is arriving: the head timeout (and its 408) governs, not idleness.
            self._keepalive_handle = None
            return
        super()._process_keepalive()

    def _fail_body(self, e: BadRequest) -> None:
        self._payload.set_exception(e)
        self._lingering_time = 0.0  # nothing more of this body is worth reading
        self.close()

    # -- the one timer --------------------------------------------------------------------
    def _arm(self, due: float) -> None:
        if due >= self._timer_at:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = due
        self._timer = self._loop.call_later(max(0.0, due - time.monotonic()), self._fire)

    def _fire(self) -> None:
        self._timer, self._timer_at = None, float("inf")
        if self.transport is None or self._force_close:
            return
        now = time.monotonic()
        g = self._guard
        p = self._payload
        if p is not None and not p.is_eof() and p.exception() is None:
            due = self._body_at + g.body_timeout_s
            if now < due:
                self._arm(due)
            else:
                self._event("body_timeout")
                self._fail_body(SlowClient(
                    f"request body timed out: no data for {g.body_timeout_s:g} s"))
            return
        if self._head_at is None:
            return
        due = self._head_at + g.head_timeout_s
        if now < due:
            self._arm(due)
            return
        if getattr(self, "_request_in_progress", False):
            # A pipelined head behind a running request waits for that request.
            self._arm(now + 1.0)
            return
        self._event("head_timeout")
        if self._head_bytes and self.transport is not None:
            body = openai_error_body(
                f"request head timed out: not complete after {g.head_timeout_s:g} s",
                code="request_timeout")
            self.transport.write(_raw(408, body, self._headers()))
        self.force_close()

    # -- answers ----------------------------------------------------------------------
    def handle_error(
        self, request: web.BaseRequest, status: int = 500, exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        """aiohttp's error answer (framing errors, a crashed handler) as OpenAI JSON."""
        if status >= 500:
            self.log_exception("Error handling request from %s", self._client, exc_info=exc)
            phrase = HTTPStatus(status).phrase
            code, text, etype = phrase.lower().replace(" ", "_"), phrase, "server_error"
        else:
            log.debug("malformed request from %s: %r", self._client, exc)
            self._event("malformed")
            code, text = _framing(exc)
            etype = "invalid_request_error"
        if request.writer.output_size > 0:
            raise ConnectionError("the response had started: no error answer can follow")
        resp = json_error(status, text, code, headers=self._headers(), etype=etype)
        resp.force_close()
        return resp

    def _headers(self) -> dict[str, str]:
        h = self._guard.headers
        return dict(h()) if h is not None else {}

    def _event(self, reason: str) -> None:
        if self._guard.on_event is not None:
            self._guard.on_event(reason)


class _GuardedServer(web.Server):
    """aiohttp's low-level server making guarded connections; counts them per address."""

    def __init__(self, base: web.Server, guard: GuardSettings) -> None:
        super().__init__(
            base.request_handler, request_factory=base.request_factory,
            handler_cancellation=base.handler_cancellation, loop=base._loop, **base._kwargs,
        )
        self.guard = guard
        self._per_client: dict[str, int] = {}

    def opened(self, client: str) -> int:
        n = self._per_client.get(client, 0) + 1
        self._per_client[client] = n
        return n

    def closed(self, client: str) -> None:
        n = self._per_client.get(client, 0) - 1
        if n > 0:
            self._per_client[client] = n
        else:
            self._per_client.pop(client, None)

    def __call__(self) -> RequestHandler:
        return _GuardedHandler(self, loop=self._loop, **self._kwargs)


class GuardedRunner(web.AppRunner):
    """``web.AppRunner`` whose connections follow ``guard``. Handler cancellation is
    on: a client that hangs up cancels its handler (and so its upstream work)."""

    def __init__(self, app: web.Application, guard: GuardSettings, **kwargs: Any) -> None:
        kwargs.setdefault("keepalive_timeout", guard.idle_timeout_s)
        kwargs.setdefault("handler_cancellation", True)
        super().__init__(app, **kwargs)
        self._guard = guard

    async def _make_server(self) -> web.Server:
        return _GuardedServer(await super()._make_server(), self._guard)
