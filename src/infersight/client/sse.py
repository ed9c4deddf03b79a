"""An incremental Server-Sent Events parser for OpenAI-style streams.

Bytes arrive in arbitrary pieces (a read may end in the middle of a line, of a
UTF-8 sequence or of a CRLF pair). :class:`SSEParser` keeps the unfinished tail and
returns complete events as soon as their terminating blank line is seen, so an
event's arrival time is the time of the read that completed it.

Each data payload is decoded once with orjson and the facts the client records per
event (content or not, how many tokens, finish_reason, usage, error) are extracted
in the same pass. Anything that is not a valid stream raises
:class:`~infersight.core.errors.MalformedStream` and nothing else.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import orjson

from infersight.core.errors import MalformedStream

__all__ = ["SSEEvent", "SSEParser"]

_EOL = re.compile(rb"\r\n|\r|\n")
_DONE = b"[DONE]"


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


def _analyse(ev: SSEEvent, obj: dict[str, Any]) -> None:
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
    choices = obj.get("choices")
    if choices.__class__ is not list or not choices:
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


class SSEParser:
    """Incremental SSE parser: ``feed(bytes) -> [SSEEvent]``, ``close() -> [SSEEvent]``.

    Handles LF, CRLF and CR line endings (also a CRLF split across reads), comments and
    keep-alive lines, multi-line ``data``, and the ``event``, ``id`` and ``retry``
    fields. Blocks with no ``data`` line (comments, keep-alives) dispatch nothing.
    """

    __slots__ = ("_buf", "_data", "_event", "_id", "_raw", "_retry", "_skip_lf")

    def __init__(self) -> None:
        self._buf = b""
        self._raw = b""  # bytes of the current event from earlier reads
        self._data: list[bytes] = []
        self._event: str | None = None
        self._id: str | None = None
        self._retry: int | None = None
        self._skip_lf = False

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """Parse one read; return the events it completed (possibly none)."""
        if not chunk:
            return []
        if self._skip_lf:
            # The previous read ended with CR; a following LF belongs to that CRLF.
            self._skip_lf = False
            if chunk[0] == 10:
                chunk = chunk[1:]
                if not chunk:
                    return []
        buf = self._buf + chunk if self._buf else chunk
        out: list[SSEEvent] = []
        pos = 0
        start = 0  # where the current event's bytes begin in buf
        if 13 not in chunk:
            find = buf.find
            while True:
                end = find(b"\n", pos)
                if end < 0:
                    break
                nxt = end + 1
                if end == pos:
                    ev = self._dispatch(buf, start, nxt)
                    if ev is not None:
                        out.append(ev)
                    start = nxt
                elif buf.startswith(b"data: ", pos):
                    self._data.append(buf[pos + 6 : end])
                else:
                    self._line(buf[pos:end])
                pos = nxt
        else:
            n = len(buf)
            for m in _EOL.finditer(buf, pos):
                end, nxt = m.span()
                if nxt == n and buf[end] == 13 and nxt - end == 1:
                    self._skip_lf = True
                if end == pos:
                    ev = self._dispatch(buf, start, nxt)
                    if ev is not None:
                        out.append(ev)
                    start = nxt
                else:
                    self._line(buf[pos:end])
                pos = nxt
        if start < pos:
            self._raw += buf[start:pos]
        self._buf = buf[pos:]
        return out

    def close(self) -> list[SSEEvent]:
        """End of stream: finish a last event that lacks its blank line, if valid.

        An unfinished event whose payload does not decode is a cut stream, not a
        malformed one, so it is dropped (the caller decides about truncation).
        """
        out: list[SSEEvent] = []
        if self._buf:
            tail = self._buf
            self._buf = b""
            self._line(tail)
            self._raw += tail
        if self._data:
            try:
                ev = self._dispatch(b"", 0, 0)
            except MalformedStream:
                ev = None
            if ev is not None:
                out.append(ev)
        return out

    # -- internals -------------------------------------------------------------
    def _line(self, line: bytes) -> None:
        if line[0] == 58:  # ":" comment / keep-alive
            return
        colon = line.find(b":")
        if colon < 0:
            name, value = line, b""
        else:
            name = line[:colon]
            value = line[colon + 1 :]
            if value[:1] == b" ":
                value = value[1:]
        if name == b"data":
            self._data.append(value)
        elif name == b"event":
            self._event = self._text(value)
        elif name == b"id":
            if b"\x00" not in value:
                self._id = self._text(value)
        elif name == b"retry" and value.isdigit():
            self._retry = int(value)
        # Unknown fields are ignored, as the SSE specification requires.

    @staticmethod
    def _text(value: bytes) -> str:
        try:
            return value.decode()
        except UnicodeDecodeError:
            raise MalformedStream("SSE field is not valid UTF-8") from None

    def _dispatch(self, buf: bytes, start: int, nxt: int) -> SSEEvent | None:
        data_lines = self._data
        raw = self._raw + buf[start:nxt] if self._raw else buf[start:nxt]
        self._raw = b""
        event = self._event or "message"
        self._event = None
        if not data_lines:
            return None
        self._data = []
        data = data_lines[0] if len(data_lines) == 1 else b"\n".join(data_lines)
        ev = SSEEvent(data, raw, None, False, False, 0, event, self._id, self._retry)
        if data == _DONE or ((data[:1].isspace() or data[-1:].isspace()) and data.strip() == _DONE):
            ev.done = True
            return ev
        if not data.strip() and event != "error":
            return ev  # an empty data line: valid SSE, nothing to decode
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError:
            if event == "error":
                ev.error = {"message": self._text(data)[:500]}
                return ev
            raise MalformedStream(
                f"SSE data is not JSON: {data[:80]!r}" + ("..." if len(data) > 80 else "")
            ) from None
        if not isinstance(obj, dict):
            raise MalformedStream(f"SSE data is not a JSON object: {data[:80]!r}")
        ev.json = obj
        _analyse(ev, obj)
        return ev
