"""Rules every request meets before its handler, on aiohttp's public API.

- **Ambiguous framing is refused** (docs/design.md section 4): aiohttp's parser
  refuses most of it itself (both Content-Length and Transfer-Encoding, a repeated or
  signed Content-Length, obs-fold, bare LF, bad chunk lines and trailers; see
  :mod:`.listener`); what it accepts and h11 refuses is refused here with a 400 and
  the connection closed: a request line of any version but HTTP/1.0 and 1.1
  (HTTP/0.9, HTTP/2.0), and a ``Transfer-Encoding`` other than ``chunked`` alone
  (``identity, chunked``).
- **Every error aiohttp raises is OpenAI JSON**: a route's 404 or 405 (with
  ``Allow``), 404 for ``OPTIONS *``, 413, 417 (:meth:`RequestGuard.middleware`), and
  the 417 aiohttp answers before any middleware runs (:meth:`RequestGuard.json_answers`).
- **``Expect: 100-continue`` is answered after the key check** (and the size and
  route checks): a client without a key never gets to send its body
  (:meth:`RequestGuard.expect`).
- **The body is read with its limits** (:func:`read_body`): ``max_body_bytes``
  (413), ``body_timeout_s`` around each read (408), and a body that cannot be
  decoded (``Content-Encoding: gzip`` that is not gzip) or whose framing breaks
  midway is a 400.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import orjson
from aiohttp import hdrs, web

from infersight.core.errors import InfersightError
from infersight.gateway.error_answers import error_response, json_error, openai_error_body
from infersight.gateway.errors import ClientFault, InputError, MalformedRequest, SlowClient
from infersight.gateway.listener import ClientLimits, Connection

__all__ = ["Handler", "RequestGuard", "read_body"]

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
#: A 401 for a request whose key is missing or wrong (None: let it through).
Denier = Callable[[web.Request], web.StreamResponse | None]

_VERSIONS = frozenset({(1, 0), (1, 1)})
_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"


def _framing_refusal(request: web.BaseRequest) -> MalformedRequest | None:
    v = request.version
    if (v.major, v.minor) not in _VERSIONS:
        return MalformedRequest(
            f"malformed HTTP request: HTTP/{v.major}.{v.minor} is not served here (use HTTP/1.1)"
        )
    te = request.headers.getall(hdrs.TRANSFER_ENCODING, ())
    if te and (len(te) > 1 or te[0].strip().lower() != "chunked"):
        return MalformedRequest("malformed HTTP request: Transfer-Encoding must be 'chunked' alone")
    return None


async def read_body(request: web.BaseRequest, limits: ClientLimits) -> bytes:
    """The whole body, within ``max_body_bytes`` and with at most ``body_timeout_s``
    between two reads. Raises InputError (413), SlowClient (408) or MalformedRequest
    (400); after the last two the caller closes the connection."""
    cap = limits.max_body_bytes
    if (request.content_length or 0) > cap:
        raise InputError(f"request body exceeds {cap} bytes", code="body_too_large", status=413)
    stream = request.content
    parts: list[bytes] = []
    size = 0
    try:
        while True:
            async with asyncio.timeout(limits.body_timeout_s):
                chunk = await stream.readany()
            if not chunk:
                break
            size += len(chunk)
            if size > cap:
                raise InputError(
                    f"request body exceeds {cap} bytes", code="body_too_large", status=413
                )
            parts.append(chunk)
    except TimeoutError:
        limits.event("body_timeout")
        raise SlowClient(
            f"request body timed out: no data for {limits.body_timeout_s:g} s"
        ) from None
    except web.RequestPayloadError as e:
        limits.event("malformed")
        why = str(e).strip().splitlines()
        what = "could not be decoded" if "encoding" in str(e).lower() else "is malformed"
        raise MalformedRequest(
            f"malformed HTTP request: the body {what}"
            + (f" ({why[-1].strip()[:80]})" if what != "is malformed" and why else "")
        ) from None
    return parts[0] if len(parts) == 1 else b"".join(parts)


class RequestGuard:
    """The middleware and ``Expect`` handler of one gateway."""

    def __init__(
        self, limits: ClientLimits, denied: Denier, headers: Callable[[], dict[str, str]]
    ) -> None:
        self.limits = limits
        self.denied = denied
        self.headers = headers
        #: The handlers that only refuse (404, 405): no body is asked for them.
        self._refusing: set[object] = {self._not_found}

    def _json(self, e: InfersightError, extra: dict[str, str] | None = None) -> web.Response:
        return error_response(e, self.headers()["X-Request-Id"], headers=extra)

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Framing refusals, aiohttp's HTTP errors as OpenAI JSON, and the connection's
        busy state around the handler."""
        proto = request.protocol
        conn = proto if isinstance(proto, Connection) else None
        if conn is not None:
            conn.request_started(request.content)
        try:
            refusal = _framing_refusal(request)
            if refusal is not None:
                self.limits.event("malformed")
                resp: web.StreamResponse = self._json(refusal)
                resp.force_close()
                return resp
            try:
                return await handler(request)
            except web.HTTPException as e:
                return self._http_error(request, e)
            except InfersightError as e:  # a handler's refusal it did not answer itself
                resp = self._json(e)
                if isinstance(e, ClientFault):
                    resp.force_close()
                return resp
        finally:
            if conn is not None:
                conn.request_ended()

    def _http_error(self, request: web.Request, e: web.HTTPException) -> web.StreamResponse:
        if e.status in (404, 405) and (denied := self.denied(request)) is not None:
            return denied  # unknown paths need the key too
        extra: dict[str, str] = {}
        if e.status == 404:
            message, code = f"no such endpoint: {request.method} {request.path[:200]}", "not_found"
        elif e.status == 405:
            allow = extra["Allow"] = e.headers.get(hdrs.ALLOW, "")
            code = "method_not_allowed"
            message = f"{request.path[:200]} accepts {allow or 'other methods'}"
            message += f", not {request.method}"
        elif e.status == 413:
            message = f"request body exceeds {self.limits.max_body_bytes} bytes"
            code = "body_too_large"
        else:
            message = e.reason or "HTTP error"
            code = e.reason.lower().replace(" ", "_") or "http_error"
        err = InputError(message, code=code, status=e.status)
        resp = self._json(err, extra)
        if e.status >= 500 or (e.status != 413 and request.body_exists):
            resp.force_close()
        return resp

    async def json_answers(self, request: web.Request, response: web.StreamResponse) -> None:
        """The ``on_response_prepare`` signal: an answer aiohttp raised where no middleware
        runs, rewritten as OpenAI JSON before its head is sent.

        A request whose target is not a path (``CONNECT host:port``, ``OPTIONS *``)
        matches no route, not even the catch-all, so an ``Expect`` header on it meets
        aiohttp's default handler, whose 417 is raised before the middleware. Every
        other HTTP error is answered by :meth:`middleware`, which never returns an
        ``HTTPException``: one that gets here is aiohttp's own."""
        if not isinstance(response, web.HTTPException):
            return
        value = request.headers.get(hdrs.EXPECT, "")
        if response.status == 417:
            message, code = f"unsupported Expect: {value[:100]}", "expectation_failed"
        else:
            message = response.reason or "HTTP error"
            code = message.lower().replace(" ", "_")
        body = orjson.dumps(openai_error_body(message, code=code))
        response.body = body
        response.content_type = "application/json"
        # aiohttp has counted the text body by now: the JSON one is counted again.
        response.headers[hdrs.CONTENT_LENGTH] = str(len(body))
        response.headers.update(self.headers())

    # -- routes --------------------------------------------------------------------
    def add_routes(self, app: web.Application, path: str, methods: dict[str, Handler]) -> None:
        """``path`` with a handler per method (GET also answers HEAD); any other method
        gets a 405 that lists them in ``Allow``."""
        allowed = sorted({*methods, *(["HEAD"] if "GET" in methods else [])})
        for method, handler in methods.items():
            app.router.add_route(method, path, handler, expect_handler=self.expect)
            if method == "GET":
                app.router.add_route("HEAD", path, handler, expect_handler=self.expect)

        async def not_allowed(request: web.Request) -> web.StreamResponse:
            raise web.HTTPMethodNotAllowed(request.method, allowed)

        self._refusing.add(not_allowed)
        app.router.add_route("*", path, not_allowed, expect_handler=self.expect)

    def add_catch_all(self, app: web.Application) -> None:
        """Every other path: 404 (after the key check); and aiohttp's own answers as
        JSON (:meth:`json_answers`)."""
        app.router.add_route("*", "/{tail:.*}", self._not_found, expect_handler=self.expect)
        app.on_response_prepare.append(self.json_answers)

    async def _not_found(self, request: web.Request) -> web.StreamResponse:
        raise web.HTTPNotFound()

    async def expect(self, request: web.Request) -> web.StreamResponse | None:
        """The ``Expect`` handler of every route: 417 for anything but 100-continue;
        the key, route and size are checked before ``100 Continue`` is sent."""
        conn = request.protocol
        if isinstance(conn, Connection):
            conn.request_started(request.content)
        value = request.headers.get(hdrs.EXPECT, "")
        if request.match_info.handler in self._refusing:
            return None  # a 404 or 405 follows: no body is asked for
        if value.lower() != "100-continue":
            resp: web.StreamResponse = json_error(
                417,
                f"unsupported Expect: {value[:100]}",
                "expectation_failed",
                headers=self.headers(),
            )
        elif (denied := self.denied(request)) is not None:
            resp = denied
        elif (request.content_length or 0) > self.limits.max_body_bytes:
            resp = self._json(
                InputError(
                    f"request body exceeds {self.limits.max_body_bytes} bytes",
                    code="body_too_large",
                    status=413,
                )
            )
        else:
            if request.version == (1, 1):
                await request.writer.write(_CONTINUE)
            return None
        resp.force_close()  # its body was never asked for
        if isinstance(conn, Connection):
            conn.request_ended()
        return resp
