"""What a client sees of an upstream's failure, and what the log gets instead.

The client's errors name the upstream's URL and quote the server (``HTTP 400 from
http://10.0.0.5:8000/v1/chat/completions: ...``): right for a log, wrong for the
gateway's clients, who must learn neither the address nor the credentials of what is
behind it. So:

- an upstream's **client error** (4xx other than 401/403/429, and not an engine's
  out-of-memory answer) is the caller's own fault and reaches it unchanged: its
  status and its ``error`` object (message, type, code, param) as the upstream wrote
  them (FastAPI's ``detail`` and vLLM's flat ``{"object": "error", ...}`` are put in
  the OpenAI shape, with the same values);
- every other upstream failure is told by the upstream's configured *name*, the kind
  of failure and, for an HTTP error, the server's own message with any URL removed;
- the full error, URL included (credentials stripped), goes to the log: at most one
  line per upstream and error kind every ``LOG_EVERY_S`` seconds, with the number of
  lines held back, so a failing upstream cannot flood it.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from typing import Any

import orjson

from infersight.client.errors_map import extract_message
from infersight.core.endpoint import shown_url
from infersight.core.errors import (
    AuthError,
    BadRequest,
    InfersightError,
    OutOfMemory,
    RateLimited,
    StatusError,
)

__all__ = ["LOG_EVERY_S", "FailureLog", "mark", "passthrough", "public_message", "upstream_of"]

log = logging.getLogger("infersight.gateway")

LOG_EVERY_S = 10.0
_ATTR = "_infersight_upstream"
_URL = re.compile(r"\bhttps?://\S+", re.I)
_OPENAI_FIELDS = ("message", "type", "code", "param")

#: How each kind of upstream failure is told to the client.
_TOLD = {
    "ConnectError": "could not be reached",
    "ConnectTimeout": "did not accept a connection in time",
    "ResetError": "closed the connection before answering",
    "ReadError": "broke the connection",
    "FirstTokenTimeout": "sent nothing within its first-byte limit",
    "IdleTimeout": "stalled in the middle of its answer (idle limit)",
    "DeadlineExceeded": "did not answer before the request's deadline",
    "MalformedStream": "sent an invalid answer",
    "TruncatedStream": "ended its answer early",
    "ProtocolError": "sent an invalid answer",
    "OutOfMemory": "ran out of memory",
    "Overloaded": "is overloaded",
    "RateLimited": "asked to slow down",
    "ServerError": "failed",
    "AuthError": "refused the gateway's own credentials",
    "BadRequest": "refused the request",
}


def mark(e: InfersightError, upstream: str) -> None:
    """Note that ``e`` came from ``upstream`` (so its text must not reach the client)."""
    setattr(e, _ATTR, upstream)


def upstream_of(e: InfersightError) -> str | None:
    """The upstream ``e`` came from, or None for the gateway's own errors."""
    name = getattr(e, _ATTR, None)
    return name if isinstance(name, str) else None


def _server_text(e: InfersightError) -> str:
    if not isinstance(e, StatusError) or not e.body:
        return ""
    return _URL.sub("<url>", extract_message(e.body.encode()))


def public_message(e: InfersightError, upstream: str) -> str:
    """The client-facing sentence for an upstream failure: no URL, no credentials."""
    text = f"upstream {upstream} {_TOLD.get(e.kind, 'failed')}"
    if isinstance(e, StatusError) and e.status:
        text += f" (HTTP {e.status})"
    server = _server_text(e)
    return f"{text}: {server}" if server else text


def passthrough(e: InfersightError) -> tuple[int, dict[str, Any]] | None:
    """(status, body) of an upstream's client error, as the upstream sent it; None
    when ``e`` is not one (it is then told with :func:`public_message`)."""
    if not isinstance(e, BadRequest) or isinstance(e, AuthError | RateLimited | OutOfMemory):
        return None
    if upstream_of(e) is None or not 400 <= e.status < 500:
        return None
    try:
        doc: Any = orjson.loads(e.body) if e.body else None
    except orjson.JSONDecodeError:
        doc = None
    err: dict[str, Any] | None = None
    if isinstance(doc, dict):
        inner = doc.get("error")
        if isinstance(inner, dict):
            err = dict(inner)
        elif "message" in doc and isinstance(doc.get("message"), str):
            err = {k: doc.get(k) for k in _OPENAI_FIELDS}  # vLLM/SGLang's flat shape
    if err is None:
        err = {
            "message": extract_message(e.body.encode()) if e.body else "",
            "type": "invalid_request_error",
            "code": None,
            "param": None,
        }
    for k in _OPENAI_FIELDS:
        err.setdefault(k, None)
    return e.status, {"error": err}


class FailureLog:
    """Logs upstream failures in full (URLs without credentials): at most one line per
    upstream and error kind every ``every`` seconds, counting the lines held back."""

    def __init__(
        self, every: float = LOG_EVERY_S, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.every = every
        self._clock = clock
        self._last: dict[tuple[str, str], float] = {}
        self._held: dict[tuple[str, str], int] = {}

    def _allow(self, key: tuple[str, str], now: float) -> int | None:
        """None when held back, else how many lines were held back before this one."""
        last = self._last.get(key)
        if last is not None and now - last < self.every:
            self._held[key] = self._held.get(key, 0) + 1
            return None
        self._last[key] = now
        return self._held.pop(key, 0)

    def failure(self, e: InfersightError, upstream: str, url: str, *, failover: bool) -> None:
        held = self._allow((upstream, e.kind), self._clock())
        if held is None:
            return
        text = str(e).replace(url, shown_url(url))
        more = f" (+{held} more in the last {self.every:g} s)" if held else ""
        then = "failing over" if failover else "answering the client with an error"
        log.warning("upstream %s: %s: %s; %s%s", upstream, e.kind, text, then, more)
