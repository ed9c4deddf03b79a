"""The fake server's JSON answers: bodies, OpenAI-style errors, word counts."""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

__all__ = ["count_words", "error_response", "json_response"]


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
