"""OpenAI-style error answers as raw HTTP/1.1 bytes, for servers that write to the socket.

A malformed request (garbage request line, negative or duplicate Content-Length, an
oversize header line, a bad chunk size) is answered like any other bad input: a 4xx
with an ``{"error": {...}}`` JSON body, never a bare text 400. :func:`raw_error` renders
any error as the complete response (status line, headers, body) for servers built on
asyncio protocols, such as the ``serve`` front, which write to the transport themselves.
"""

from __future__ import annotations

import http
import math

import orjson

from infersight.core.errors import InfersightError
from infersight.gateway.errors import InputError
from infersight.gateway.http import error_body, http_status

__all__ = ["raw_error"]


def _reason(status: int) -> str:
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return "Error"


def raw_error(
    e: InfersightError,
    *,
    close: bool,
    headers: dict[str, str] | None = None,
    head_only: bool = False,
) -> bytes:
    """``e`` as a whole HTTP/1.1 response with an OpenAI JSON error body.

    ``close`` adds ``Connection: close`` (the caller closes after writing);
    ``head_only`` leaves the body out (answers to HEAD) but keeps its length.
    """
    status = http_status(e)
    param = e.param if isinstance(e, InputError) else None
    body = orjson.dumps(error_body(e, param=param))
    lines = [
        f"HTTP/1.1 {status} {_reason(status)}",
        "Content-Type: application/json",
        f"Content-Length: {len(body)}",
    ]
    retry_after = getattr(e, "retry_after", None)
    if status in (429, 503):
        lines.append(f"Retry-After: {max(1, math.ceil(retry_after or 1))}")
    lines.extend(f"{k}: {v}" for k, v in (headers or {}).items())
    if close:
        lines.append("Connection: close")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return head if head_only else head + body
