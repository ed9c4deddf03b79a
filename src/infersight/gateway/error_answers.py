"""The gateway's error answers: an OpenAI error body for every refusal and failure.

Every error the gateway answers has the body ``{"error": {"message", "type", "code",
"param"}}`` (docs/design.md section 4), whether it is a refusal of the gateway's own
(a bad body, a missing key, a slow client), an upstream's failure told without its
URL, or an upstream's client error passed through as the upstream wrote it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any

import orjson
from aiohttp import web

from infersight.core import errors as E
from infersight.gateway.errors import KeyRefused
from infersight.gateway.public import passthrough, public_message, upstream_of

__all__ = [
    "error_body",
    "error_response",
    "json_error",
    "openai_error_body",
    "raw_error",
]

_SNAKE = re.compile(r"(?<!^)(?=[A-Z])")


def openai_error_body(
    message: str, *, code: str, etype: str = "invalid_request_error", param: str | None = None
) -> dict[str, Any]:
    """``{"error": {"message", "type", "code", "param"}}``."""
    return {"error": {"message": message, "type": etype, "code": code, "param": param}}


def json_error(
    status: int,
    message: str,
    code: str,
    *,
    headers: Mapping[str, str] | None = None,
    etype: str = "invalid_request_error",
) -> web.Response:
    """An OpenAI-style JSON error response."""
    return web.Response(
        status=status,
        body=orjson.dumps(openai_error_body(message, code=code, etype=etype)),
        content_type="application/json",
        headers=headers,
    )


def raw_error(
    status: int,
    message: str,
    code: str,
    *,
    etype: str = "invalid_request_error",
    headers: Mapping[str, str] | None = None,
) -> bytes:
    """A whole HTTP/1.1 error answer that closes the connection, as bytes: for the
    answers written before any request exists (over the connection cap, a request
    head that never completed), when there is no request to answer through aiohttp."""
    data = orjson.dumps(openai_error_body(message, code=code, etype=etype))
    lines = [
        f"HTTP/1.1 {status} {HTTPStatus(status).phrase}",
        "Content-Type: application/json",
        f"Content-Length: {len(data)}",
        "Connection: close",
        *(f"{k}: {v}" for k, v in (headers or {}).items()),
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + data


def http_status(e: E.InfersightError) -> int:
    """The status the gateway's client gets for an error."""
    if isinstance(e, E.AuthError):
        # Our own auth refusals keep 401; an upstream refusing the gateway is a 502.
        return 401 if isinstance(e, KeyRefused) else 502
    if isinstance(e, E.RateLimited):
        return 429
    if isinstance(e, E.Overloaded | E.OutOfMemory):
        return 503  # back off and retry, as on an overloaded upstream
    if isinstance(e, E.BadRequest):
        return e.status if 400 <= e.status < 500 else 400
    if isinstance(e, E.Timeout):
        return 504
    if isinstance(e, E.ConfigError):
        return 500
    if isinstance(e, E.TransportError | E.ProtocolError | E.ServerError):
        return 502
    if isinstance(e, E.StatusError) and e.status >= 400:
        return e.status
    return 500


def _code(e: E.InfersightError) -> str:
    code = getattr(e, "code", None)
    if isinstance(code, str):
        return code
    return _SNAKE.sub("_", e.kind).lower()


def error_body(e: E.InfersightError, *, param: str | None = None) -> dict[str, Any]:
    """The OpenAI error body of ``e``; an upstream's failure is told without its URL
    (:mod:`.public`)."""
    up = upstream_of(e)
    return openai_error_body(
        e.message if up is None else public_message(e, up),
        code=_code(e),
        etype=e.openai_type,
        param=param,
    )


def error_response(
    e: E.InfersightError,
    request_id: str,
    queue_delay_ms: float = 0.0,
    headers: Mapping[str, str] | None = None,
) -> web.Response:
    """An OpenAI-style JSON error with the gateway's headers (and Retry-After); an
    upstream's client error (4xx) goes through as the upstream wrote it."""
    status = http_status(e)
    param = e.param if isinstance(e, E.InvalidRequest) else None
    body = error_body(e, param=param)
    passed = passthrough(e)
    if passed is not None:
        status, body = passed
    out = {"X-Request-Id": request_id, "X-Queue-Delay": f"{queue_delay_ms:.3f}", **(headers or {})}
    if status in (429, 503):
        retry_after = getattr(e, "retry_after", None)
        out["Retry-After"] = str(max(1, math.ceil(retry_after or 1)))
    return web.Response(
        status=status, body=orjson.dumps(body), content_type="application/json", headers=out
    )
