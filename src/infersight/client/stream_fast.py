"""The streaming hot path's shortcut: record a plain chunk without an SSEEvent.

``quick_chunk`` handles the chunk nearly every token arrives in (one choice whose
delta is text) with one ``orjson.loads`` and a few dict lookups; anything else
returns False and takes the full SSEEvent path, so the facts are always the same
(tested against it in tests/integration/client/test_client_drain_equiv.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import orjson

if TYPE_CHECKING:
    from infersight.client.stream import StreamResponse

__all__ = ["quick_chunk"]

_loads = orjson.loads


def quick_chunk(sr: StreamResponse, data: bytes, t: float) -> bool:
    """Record the common chunk without an SSEEvent: one choice with text content.

    Same facts as ``analyse`` for such a chunk (1 token, its text, its
    finish_reason). Returns False for anything else (usage, errors, logprobs, tool
    calls, several choices, [DONE], bad JSON), which then takes the full path.
    """
    if data[:1] != b"{":
        return False
    try:
        obj = _loads(data)
    except orjson.JSONDecodeError:
        return False
    if obj.__class__ is not dict or "error" in obj or obj.get("usage") is not None:
        return False
    choices = obj.get("choices")
    if choices.__class__ is not list or len(choices) != 1:
        return False
    ch = choices[0]
    if ch.__class__ is not dict or ch.get("logprobs") is not None:
        return False
    delta = ch.get("delta")
    if delta.__class__ is dict:
        text = delta.get("content")
        if len(delta) > 1 and delta.get("tool_calls"):
            return False
    elif delta is None:
        text = ch.get("text")
    else:
        return False
    if not text or text.__class__ is not str:
        return False
    fr = ch.get("finish_reason")
    if fr is not None:
        sr.finish_reason = str(fr)
    rec = sr.record
    rec.chunk_times.append(t)
    rec.chunk_tokens.append(1)
    sr._text.append(text)
    sr._last_json = obj
    return True
