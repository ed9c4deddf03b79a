"""The fake server's JSON answers: bodies, OpenAI-style errors, word counts."""

from __future__ import annotations

from typing import Any, NamedTuple

import orjson
from aiohttp import web

__all__ = ["RequestShape", "count_words", "error_response", "json_response", "request_shape"]


def json_response(
    obj: Any, status: int = 200, headers: dict[str, str] | None = None
) -> web.Response:
    return web.Response(
        body=orjson.dumps(obj), status=status, headers=headers, content_type="application/json"
    )


def error_response(
    status: int, message: str, headers: dict[str, str] | None = None
) -> web.Response:
    etype = {401: "authentication_error", 429: "rate_limit_error"}.get(status, "api_error")
    return json_response(
        {"error": {"message": message, "type": etype, "code": status}}, status, headers
    )


def count_words(value: Any) -> int:
    if isinstance(value, str):
        return max(1, len(value.split()))
    if isinstance(value, list):
        return sum(count_words(v) for v in value)
    if isinstance(value, dict):
        return count_words(value.get("content", ""))
    return 1


class RequestShape(NamedTuple):
    """What a generation request asks for, as the fake counts it."""

    prompts: list[Any]
    #: Prompt tokens over all prompts (one per whitespace-separated word).
    prompt_tokens: int
    #: Tokens answered per prompt.
    tokens: int
    finish: str


def request_shape(body: dict[str, Any], chat: bool, default_tokens: int) -> RequestShape:
    """The prompts, their token count, the answer length and its finish reason.

    ``max_tokens`` caps the answer at ``default_tokens``; with ``ignore_eos`` it is exact.
    """
    prompts = [body.get("messages")] if chat else body.get("prompt", "")
    if not isinstance(prompts, list) or chat or (prompts and isinstance(prompts[0], int)):
        prompts = [prompts]
    n = default_tokens
    max_tokens = body.get("max_tokens") or body.get("max_completion_tokens")
    finish = "stop"
    if (
        isinstance(max_tokens, int)
        and max_tokens > 0
        and (body.get("ignore_eos") or max_tokens <= n)
    ):
        n, finish = max_tokens, "length"
    return RequestShape(prompts, sum(count_words(p) for p in prompts), n, finish)
