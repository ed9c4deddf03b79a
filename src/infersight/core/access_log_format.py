"""The gateway's access-log format (docs/access-log.md): what the gateway writes and
``bench --trace`` reads back, defined once.

Every line is one JSON object for one request, with ``"v": ACCESS_LOG_VERSION``.
Replay needs, besides the timing and token counts, to know which requests shared a
prompt prefix (a system prompt, a conversation's history) without the log holding a
word of any prompt: :func:`prompt_fingerprint` gives each message a chained hash (the
hash of this message and of every message before it) and its length in characters.
Two requests whose first k entries are equal sent the same first k messages.
A session label (from the client's ``X-Session-Id`` header) is logged as a hash too
(:func:`session_label`), so a user id used as a session id never reaches the log.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any, TypedDict

import orjson

__all__ = [
    "ACCESS_LOG_VERSION",
    "SESSION_HEADER",
    "AccessLogLine",
    "prompt_fingerprint",
    "session_label",
]

#: The access-log format version (docs/access-log.md); bumped on incompatible changes.
ACCESS_LOG_VERSION = 1
#: The request header whose value groups requests into one conversation.
SESSION_HEADER = "X-Session-Id"


class AccessLogLine(TypedDict, total=False):
    """One access-log line's keys, for the writer (the gateway) and the reader
    (``bench --trace``) alike: a key misspelt on either side fails type-checking.
    docs/access-log.md says what each means."""

    v: int
    ts: float
    arrival_ts: float
    request_id: str
    endpoint: str
    status: int
    latency_ms: float
    error: str | None
    model: str
    served_model: str | None
    upstream: str | None
    stream: bool
    key: str | None
    queue_ms: float
    attempts: int
    failovers: int
    ttft_ms: float | None
    prompt_tokens: int | None
    completion_tokens: int | None
    cost_usd: float | None
    via: list[str]
    truncated: bool
    usage_estimated: bool
    max_tokens: int
    session: str
    prefix: list[list[Any]]


#: Hex digits kept of each hash: 48 bits, collisions negligible for a day of traffic.
_HEX = 12


def _text(content: Any) -> str:
    """The text a message carries (content parts joined; other parts as JSON)."""
    if isinstance(content, str):
        return content
    if content is None:
        return ""
    if isinstance(content, list):
        parts = []
        for p in content:
            if isinstance(p, Mapping) and isinstance(p.get("text"), str):
                parts.append(p["text"])
            else:
                parts.append(orjson.dumps(p, option=orjson.OPT_SORT_KEYS).decode())
        return "".join(parts)
    return orjson.dumps(content, option=orjson.OPT_SORT_KEYS).decode()


def prompt_fingerprint(endpoint: str, body: Mapping[str, Any]) -> list[list[Any]]:
    """``[[role, chained_hash, chars], ...]`` for a chat request's messages, or one
    ``["prompt", hash, chars]`` entry for a completions prompt; ``[]`` otherwise.

    ``chars`` counts the characters of the message's text (tool calls included as
    JSON), which replay turns into a share of the request's prompt tokens.
    """
    if endpoint == "chat":
        msgs = body.get("messages")
        items = (
            [
                (str(m.get("role", "")), _text(m.get("content")) + _text(m.get("tool_calls")))
                for m in msgs
                if isinstance(m, Mapping)
            ]
            if isinstance(msgs, list)
            else []
        )
    elif endpoint == "completions":
        prompt = body.get("prompt")
        if isinstance(prompt, list):
            prompt = "".join(p if isinstance(p, str) else _text(p) for p in prompt)
        items = [("prompt", prompt)] if isinstance(prompt, str) else []
    else:
        return []
    out: list[list[Any]] = []
    h = hashlib.blake2b(digest_size=8)
    for role, text in items:
        h.update(role.encode() + b"\x00" + text.encode("utf-8", "surrogatepass") + b"\x01")
        out.append([role, h.hexdigest()[:_HEX], len(text)])
    return out


def session_label(value: str) -> str:
    """The logged form of a session id: a hash, the same for the same id."""
    return "s-" + hashlib.blake2b(value.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()
