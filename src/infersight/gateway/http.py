"""Request parsing and validation, and OpenAI-style error responses.

Validation is hand-written rather than pydantic because it runs on every request on
the proxy's hot path; it checks only what the gateway relies on (the model, the input
fields, ``stream``, token limits) and leaves the rest to the upstream.
"""

from __future__ import annotations

import math
import re
from typing import Any

import orjson
from aiohttp import web

from infersight.core.errors import InfersightError, StatusError
from infersight.core.httpguard import openai_error_body
from infersight.gateway.errors import InputError, KeyRefused
from infersight.gateway.public import passthrough, public_message, upstream_of

__all__ = [
    "ENDPOINTS",
    "error_body",
    "error_response",
    "estimate_prompt_tokens",
    "estimate_tokens",
    "http_status",
    "parse_body",
    "validate",
]

#: Path -> endpoint name used in metrics and batching.
ENDPOINTS = {
    "/v1/chat/completions": "chat",
    "/v1/completions": "completions",
    "/v1/embeddings": "embeddings",
}

_SNAKE = re.compile(r"(?<!^)(?=[A-Z])")


def _bad(message: str, param: str | None = None, code: str = "invalid_request") -> InputError:
    return InputError(message, param, code)


def parse_body(raw: bytes) -> dict[str, Any]:
    """Decode a JSON object body or raise BadRequest (400) with a clear message."""
    if not raw:
        raise _bad("request body is empty; send a JSON object", code="empty_body")
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        if "UTF-8" in str(e) or "utf-8" in str(e):
            raise _bad("request body is not valid UTF-8", code="invalid_utf8") from None
        raise _bad(f"request body is not valid JSON: {e}", code="invalid_json") from None
    if not isinstance(doc, dict):
        raise _bad("request body must be a JSON object", code="invalid_json")
    return doc


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    return (isinstance(v, int | float) and not isinstance(v, bool)) and math.isfinite(v)


def _text_or_tokens(v: Any, param: str) -> None:
    """str | list[str] | list[int] | list[list[int]], non-empty."""
    if isinstance(v, str):
        return
    if isinstance(v, list) and v:
        if all(isinstance(x, str) for x in v) or all(_is_int(x) for x in v):
            return
        if all(isinstance(x, list) and x and all(_is_int(t) for t in x) for x in v):
            return
    raise _bad(
        f"'{param}' must be a string, a non-empty list of strings, or token id list(s)",
        param,
    )


def validate(endpoint: str, body: dict[str, Any]) -> tuple[str, bool]:
    """Check the fields the gateway relies on; return (model, stream)."""
    model = body.get("model")
    if not isinstance(model, str) or not model.strip():
        raise _bad("'model' is required and must be a non-empty string", "model")
    stream = body.get("stream", False)
    if stream is None:
        stream = False
    if not isinstance(stream, bool):
        raise _bad("'stream' must be a boolean", "stream")
    if endpoint == "chat":
        msgs = body.get("messages")
        if not isinstance(msgs, list) or not msgs:
            raise _bad("'messages' must be a non-empty list", "messages")
        for i, m in enumerate(msgs):
            if not isinstance(m, dict) or not isinstance(m.get("role"), str):
                raise _bad(f"'messages[{i}]' must be an object with a string 'role'", "messages")
            c = m.get("content")
            if c is not None and not isinstance(c, str | list):
                raise _bad(f"'messages[{i}].content' must be a string or a list", "messages")
    elif endpoint == "completions":
        _text_or_tokens(body.get("prompt"), "prompt")
    elif endpoint == "embeddings":
        _text_or_tokens(body.get("input"), "input")
        if stream:
            raise _bad("embeddings cannot be streamed", "stream")
    for name in ("max_tokens", "max_completion_tokens", "n"):
        v = body.get(name)
        if v is not None and (not _is_int(v) or v < (1 if name == "n" else 0)):
            raise _bad(f"'{name}' must be a non-negative integer", name)
    for name in ("temperature", "top_p", "presence_penalty", "frequency_penalty"):
        v = body.get(name)
        if v is not None and not _is_num(v):
            raise _bad(f"'{name}' must be a number", name)
    so = body.get("stream_options")
    if so is not None and not isinstance(so, dict):
        raise _bad("'stream_options' must be an object", "stream_options")
    return model, stream


def _chars(v: Any) -> int:
    if isinstance(v, str):
        return len(v)
    if isinstance(v, list):
        return sum(_chars(x) if not _is_int(x) else 4 for x in v)
    if isinstance(v, dict):
        return _chars(v.get("content")) + _chars(v.get("text"))
    return 0


_INPUT_FIELD = {"chat": "messages", "completions": "prompt", "embeddings": "input"}


def estimate_prompt_tokens(endpoint: str, body: dict[str, Any]) -> int:
    """Rough prompt tokens (chars/4): what an upstream that never reported usage read."""
    return max(1, _chars(body.get(_INPUT_FIELD[endpoint])) // 4)


def estimate_tokens(endpoint: str, body: dict[str, Any]) -> int:
    """Rough prompt tokens (chars/4) plus the requested output limit, for cost routing."""
    out = body.get("max_completion_tokens") or body.get("max_tokens") or 0
    return _chars(body.get(_INPUT_FIELD[endpoint])) // 4 + (out if _is_int(out) else 0)


def http_status(e: InfersightError) -> int:
    """The status the gateway's client gets for an error."""
    from infersight.core import errors as E

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
    if isinstance(e, StatusError) and e.status >= 400:
        return e.status
    return 500


def error_code(e: InfersightError) -> str:
    code = getattr(e, "code", None)
    if isinstance(code, str):
        return code
    return _SNAKE.sub("_", e.kind).lower()


def error_body(e: InfersightError, *, param: str | None = None) -> dict[str, Any]:
    """``{"error": {"message", "type", "code", "param"}}``; an upstream's failure is
    told without its URL (:mod:`.public`)."""
    up = upstream_of(e)
    return openai_error_body(
        e.message if up is None else public_message(e, up),
        code=error_code(e), etype=e.openai_type, param=param,
    )


def error_response(
    e: InfersightError, request_id: str, queue_delay_ms: float = 0.0
) -> web.Response:
    """An OpenAI-style JSON error with the gateway's headers (and Retry-After); an
    upstream's client error (4xx) goes through as the upstream wrote it."""
    status = http_status(e)
    param = e.param if isinstance(e, InputError) else None
    body = error_body(e, param=param)
    passed = passthrough(e)
    if passed is not None:
        status, body = passed
    headers = {"X-Request-Id": request_id, "X-Queue-Delay": f"{queue_delay_ms:.3f}"}
    retry_after = getattr(e, "retry_after", None)
    if status in (429, 503) and retry_after is not None:
        headers["Retry-After"] = str(max(1, math.ceil(retry_after)))
    elif status in (429, 503):
        headers["Retry-After"] = "1"
    return web.Response(
        status=status,
        body=orjson.dumps(body),
        content_type="application/json",
        headers=headers,
    )
