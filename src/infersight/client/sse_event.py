"""One SSE event and the per-event facts the client records (content, tokens...).

Each data payload is decoded once with orjson and the facts are extracted in the
same pass by :func:`analyse`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["SSEEvent", "analyse"]


@dataclass(slots=True)
class SSEEvent:
    """One dispatched SSE event.

    ``data`` is the payload (multi-line data joined with ``\\n``), ``raw`` the event's
    bytes exactly as received (for passthrough proxies), ``json`` the decoded payload
    (None for ``[DONE]``). ``has_content`` is true for events carrying text, reasoning
    or tool-call deltas; ``n_tokens`` is how many tokens they carry (1 per content
    event unless the server's logprobs say how many).
    """

    data: bytes
    raw: bytes = b""
    json: dict[str, Any] | None = None
    done: bool = False
    has_content: bool = False
    n_tokens: int = 0
    event: str = "message"
    id: str | None = None
    retry: int | None = None
    #: Text of the content deltas in this event (all choices, in order).
    text: str = ""
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    #: The answer's tokens so far, where the server says so in every chunk (vLLM's
    #: ``continuous_usage_stats`` in a chunk with choices, llama.cpp's
    #: ``timings_per_token`` in any).
    so_far: int | None = None
    #: The ``error`` object of an error event (``{"error": ...}`` or ``event: error``).
    error: dict[str, Any] | None = None
    #: Tool-call deltas in this event (None when there are none).
    tool_calls: list[Any] | None = None


def _choice_tokens(ch: dict[str, Any]) -> int:
    """Tokens in one content-bearing choice: 1, unless logprobs list several."""
    lp = ch.get("logprobs")
    if lp.__class__ is dict:
        lpc = lp.get("content")
        if lpc.__class__ is list and lpc:
            return len(lpc)
        toks = lp.get("tokens")
        if toks.__class__ is list and toks:
            return len(toks)
    return 1


def analyse(ev: SSEEvent, obj: dict[str, Any]) -> None:
    """Fill the per-event facts from the decoded payload (one pass, no exceptions).

    Written for speed: this runs once per streamed token.
    """
    if "error" in obj or ev.event == "error":
        err = obj.get("error")
        if isinstance(err, dict):
            ev.error = err
        elif err is not None:
            ev.error = {"message": str(err)}
        else:
            ev.error = {"message": str(obj.get("message") or obj)}
    if "usage" in obj:
        usage = obj["usage"]
        if usage.__class__ is dict:
            ev.usage = usage
    if "timings" in obj:
        timings = obj["timings"]
        if timings.__class__ is dict:
            pn = timings.get("predicted_n")
            if pn.__class__ is int:
                ev.so_far = pn
    choices = obj.get("choices")
    if choices.__class__ is not list or not choices:
        # a usage-only event's usage is the answer's total, not a count the stream
        # carried: it is what the chunks are checked against
        return
    if ev.usage is not None and ev.so_far is None:
        ct = ev.usage.get("completion_tokens")
        if ct.__class__ is int:
            ev.so_far = ct
    if len(choices) == 1:
        ch = choices[0]
        if ch.__class__ is dict:
            delta = ch.get("delta")
            if delta.__class__ is dict and len(delta) == 1:
                # The common chunk: one choice whose delta is just {"content": text}.
                text = delta.get("content")
                if text and text.__class__ is str:
                    fr = ch.get("finish_reason")
                    if fr is not None:
                        ev.finish_reason = str(fr)
                    ev.has_content = True
                    ev.n_tokens = _choice_tokens(ch) if "logprobs" in ch else 1
                    ev.text = text
                    return
    parts: list[str] = []
    tokens = 0
    for ch in choices:
        if ch.__class__ is not dict:
            continue
        fr = ch.get("finish_reason")
        if fr is not None:
            ev.finish_reason = str(fr)
        delta = ch.get("delta")
        content = False
        if delta.__class__ is dict:
            text = delta.get("content")
            if text and text.__class__ is str:
                parts.append(text)
                content = True
            if not content or len(delta) > 1:  # rarer fields: reasoning, tool calls
                reasoning = delta.get("reasoning_content") or delta.get("reasoning")
                if reasoning and isinstance(reasoning, str):
                    content = True
                tcs = delta.get("tool_calls")
                if tcs and isinstance(tcs, list):
                    ev.tool_calls = (ev.tool_calls or []) + tcs
                    content = True
        else:
            text = ch.get("text")
            if text and text.__class__ is str:
                parts.append(text)
                content = True
        if content:
            tokens += _choice_tokens(ch) if "logprobs" in ch else 1
    if tokens:
        ev.has_content = True
        ev.n_tokens = tokens
        ev.text = parts[0] if len(parts) == 1 else "".join(parts)
