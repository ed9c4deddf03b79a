"""A request body's checks: JSON, the fields the gateway relies on, and size estimates.

The field checks are :mod:`infersight.core.request_checks`' (shared with ``batch``);
this adds what only a server decides: the model and ``stream``. It checks what the
gateway relies on and leaves the rest to the upstream.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any

import orjson

from infersight.core.request_checks import check_body, is_int
from infersight.gateway.errors import InputError

__all__ = [
    "ENDPOINTS",
    "estimate_prompt_tokens",
    "estimate_tokens",
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


def parse_body(raw: bytes) -> dict[str, Any]:
    """Decode a JSON object body or raise BadRequest (400) with a clear message."""
    if not raw:
        raise InputError("request body is empty; send a JSON object", code="empty_body")
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        if "UTF-8" in str(e) or "utf-8" in str(e):
            raise InputError("request body is not valid UTF-8", code="invalid_utf8") from None
        raise InputError(f"request body is not valid JSON: {e}", code="invalid_json") from None
    if not isinstance(doc, dict):
        raise InputError("request body must be a JSON object", code="invalid_json")
    return doc


def validate(endpoint: str, body: dict[str, Any]) -> tuple[str, bool]:
    """Check the fields the gateway relies on; return (model, stream)."""
    model = body.get("model")
    if not isinstance(model, str) or not model.strip():
        raise InputError("'model' is required and must be a non-empty string", "model")
    stream = body.get("stream", False)
    if stream is None:
        stream = False
    if not isinstance(stream, bool):
        raise InputError("'stream' must be a boolean", "stream")
    if endpoint == "embeddings" and stream:
        raise InputError("embeddings cannot be streamed", "stream")
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
        + (f"; did you mean {hint!r}?" if hint else "")
        + " (see GET /v1/models)",
        param="model",
        code="model_not_found",
        status=404,
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
