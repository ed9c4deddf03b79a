"""OpenAI-style error answers as raw HTTP/1.1 bytes, for servers that write to the socket.

A malformed request (garbage request line, negative or duplicate Content-Length, an
oversize header line, a bad chunk size) is answered like any other bad input: a 4xx
with an ``{"error": {...}}`` JSON body, never a bare text 400. :func:`raw_error` renders
any error as the complete response (status line, headers, body) for servers built on
asyncio protocols, such as the ``serve`` front, which write to the transport themselves.
"""

from __future__ import annotations

import math

from infersight.core.errors import InfersightError, InvalidRequest
from infersight.core.httpguard import raw_json_response
from infersight.gateway.http import error_body, http_status

__all__ = ["raw_error"]


def raw_error(
    e: InfersightError,
    *,
    close: bool,
    headers: dict[str, str] | None = None,
    head_only: bool = False,
) -> bytes:
    """``e`` as a whole HTTP/1.1 response with the gateway's OpenAI JSON error body.

    ``close`` adds ``Connection: close`` (the caller closes after writing);
    ``head_only`` leaves the body out (answers to HEAD) but keeps its length.
    """
    status = http_status(e)
    param = e.param if isinstance(e, InvalidRequest) else None
    extra = dict(headers or {})
    if status in (429, 503):
        retry_after = getattr(e, "retry_after", None)
        extra["Retry-After"] = str(max(1, math.ceil(retry_after or 1)))
    return raw_json_response(status, error_body(e, param=param), extra, close=close,
                             head_only=head_only)
