"""Request parsing and validation, and OpenAI-style error responses.

Validation is hand-written rather than pydantic because it runs on every request on
the proxy's hot path; it checks only what the gateway relies on (the model, the input
fields, ``stream``, token limits) and leaves the rest to the upstream.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterable
from typing import Any

import orjson
from aiohttp import web

from infersight.core.errors import InfersightError, InvalidRequest, StatusError
from infersight.core.httpguard import openai_error_body
from infersight.core.request_checks import check_body, is_int
from infersight.gateway.errors import InputError, KeyRefused
from infersight.gateway.public import passthrough, public_message, upstream_of

__all__ = [
    "ENDPOINTS",
    "closest_name",
    "error_body",
    "error_response",
    "estimate_prompt_tokens",
    "estimate_tokens",
    "http_status",
    "model_not_found",
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
    if endpoint == "embeddings" and stream:
        raise _bad("embeddings cannot be streamed", "stream")
    check_body(endpoint, body)
    return model, stream


def model_not_found(
    model: str, where: str = "this gateway", known: Iterable[str] = ()
) -> InputError:
    """404 for a model the server does not serve; "did you mean" the closest of the
    ``known`` names (a typo, another case, a missing prefix)."""
    hint = closest_name(model, known)
    return InputError(
        f"model {model!r} is not served by {where}"
        + (f"; did you mean {hint!r}?" if hint else "") + " (see GET /v1/models)",
        param="model", code="model_not_found", status=404,
    )


def closest_name(name: str, known: Iterable[str]) -> str | None:
    """The known name ``name`` most likely meant (difflib's ratio, case ignored), or None."""
    names = [k for k in known if k != name]
    by_lower = {k.lower(): k for k in names}
    if name.lower() in by_lower:
        return by_lower[name.lower()]
    tails = [k for k in names if k.lower().rsplit("/", 1)[-1] == name.lower()]
    if len(tails) == 1:  # "llama-3-8b" for "meta-llama/llama-3-8b"
        return tails[0]
    close = difflib.get_close_matches(name.lower(), list(by_lower), n=1, cutoff=0.75)
    return by_lower[close[0]] if close else None


def _chars(v: Any) -> int:
    if isinstance(v, str):
        return len(v)
    if isinstance(v, list):
        return sum(_chars(x) if not is_int(x) else 4 for x in v)
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
    return _chars(body.get(_INPUT_FIELD[endpoint])) // 4 + (out if is_int(out) else 0)


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
    param = e.param if isinstance(e, InvalidRequest) else None
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
