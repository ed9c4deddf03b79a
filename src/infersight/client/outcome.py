"""Finishing a request: failure marks, and the merged body of a streamed answer."""

from __future__ import annotations

import time
from typing import Any

import orjson

from infersight.client.errors_map import error_from_event
from infersight.core import errors as E
from infersight.core.records import RequestRecord

__all__ = [
    "fail_record",
    "mark_cancelled",
    "merge_tool_calls",
    "merged_response",
    "settle_tokens",
    "whole_body",
]


def fail_record(rec: RequestRecord, exc: E.InfersightError) -> E.InfersightError:
    """Mark the record failed with ``exc``'s kind and attach it as ``exc.record``."""
    if rec.end is None:
        rec.end = time.monotonic()
    rec.ok = False
    rec.error = exc.kind
    rec.error_message = str(exc)
    if rec.status is None and isinstance(exc, E.StatusError) and exc.status:
        rec.status = exc.status
    exc.record = rec
    return exc


def mark_cancelled(rec: RequestRecord) -> None:
    """Mark the record cancelled (Ctrl-C, or the caller left before the end)."""
    if rec.ok:
        return
    if rec.end is None:
        rec.end = time.monotonic()
    rec.ok = False
    rec.cancelled = True
    rec.error = "Cancelled"
    rec.error_message = "cancelled before completion"


def merge_tool_calls(store: dict[int, dict[str, Any]], deltas: list[Any]) -> None:
    """Accumulate streamed tool-call deltas (by index) into whole tool calls."""
    for d in deltas:
        if not isinstance(d, dict):
            continue
        idx = d.get("index", len(store))
        tc = store.setdefault(
            idx, {"id": None, "type": "function", "function": {"name": "", "arguments": ""}}
        )
        if d.get("id"):
            tc["id"] = d["id"]
        fn = d.get("function")
        if isinstance(fn, dict):
            if fn.get("name"):
                tc["function"]["name"] += str(fn["name"])
            if fn.get("arguments"):
                tc["function"]["arguments"] += str(fn["arguments"])


def whole_body(
    body: bytes, url: str, status: int, key: str | None
) -> tuple[dict[str, Any], list[str], str | None, dict[str, Any] | None, int]:
    """A non-streamed JSON answer: (object, texts, finish_reason, usage, tokens).

    ``tokens`` is the completion's token count from ``usage`` (1 when unknown): the
    whole body is one chunk. An error wrapped in a 200 answer raises its typed error.
    """
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise E.MalformedStream(f"response body from {url} is not JSON: {body[:80]!r}") from None
    if not isinstance(obj, dict):
        obj = {"data": obj}
    err = obj.get("error")
    if err and "choices" not in obj and "data" not in obj:
        # An error wrapped in a 200 answer (some proxies and servers do this).
        raise error_from_event(err if isinstance(err, dict) else {"message": str(err)}, status, key)
    usage = obj.get("usage")
    texts: list[str] = []
    finish: str | None = None
    choices = obj.get("choices")
    if isinstance(choices, list):
        for ch in choices:
            if not isinstance(ch, dict):
                continue
            msg = ch.get("message")
            text = msg.get("content") if isinstance(msg, dict) else ch.get("text")
            if isinstance(text, str):
                texts.append(text)
            if ch.get("finish_reason") is not None:
                finish = str(ch["finish_reason"])
    usage = usage if isinstance(usage, dict) else None
    n = usage.get("completion_tokens") if usage else None
    return obj, texts, finish, usage, n if isinstance(n, int) and n > 0 else 1


def merged_response(
    last: dict[str, Any],
    text: str,
    tool_calls: dict[int, dict[str, Any]],
    finish_reason: str | None,
    usage: dict[str, Any] | None,
) -> dict[str, Any]:
    """An OpenAI-style final body assembled from a stream's chunks."""
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if tool_calls:
        message["tool_calls"] = [tool_calls[k] for k in sorted(tool_calls)]
    obj = str(last.get("object") or "chat.completion")
    choice: dict[str, Any] = (
        {"index": 0, "text": text, "finish_reason": finish_reason}
        if obj == "text_completion"
        else {"index": 0, "message": message, "finish_reason": finish_reason}
    )
    return {
        "id": last.get("id"),
        "object": obj.replace(".chunk", ""),
        "created": last.get("created"),
        "model": last.get("model"),
        "choices": [choice],
        "usage": usage,
    }


def settle_tokens(rec: RequestRecord, usage: dict[str, Any] | None, *, estimated_ok: bool) -> None:
    """Token counts of a finished answer: the server's usage first, else the chunks.

    ``usage_mismatch`` flags usage that disagrees with the content-chunk count
    (only meaningful for streams, hence ``estimated_ok``).
    """
    counted = sum(rec.chunk_tokens)
    ct = usage.get("completion_tokens") if usage else None
    pt = usage.get("prompt_tokens") if usage else None
    if isinstance(pt, int):
        rec.prompt_tokens = pt
        details = usage.get("prompt_tokens_details") if usage else None
        cached = details.get("cached_tokens") if isinstance(details, dict) else None
        if isinstance(cached, int) and not isinstance(cached, bool):
            rec.cached_tokens = cached
    if isinstance(ct, int):
        rec.completion_tokens = ct
        rec.usage_mismatch = ct != counted and estimated_ok
    else:
        rec.completion_tokens = counted
        rec.tokens_estimated = True
