"""An incremental Server-Sent Events parser for OpenAI-style streams.

Bytes arrive in arbitrary pieces (a read may end in the middle of a line, of a
UTF-8 sequence or of a CRLF pair). :class:`SSEParser` keeps the unfinished tail and
returns complete events as soon as their terminating blank line is seen, so an
event's arrival time is the time of the read that completed it.

Each data payload is decoded once with orjson and the facts the client records per
event (content or not, how many tokens, finish_reason, usage, error) are extracted
in the same pass. Anything that is not a valid stream raises
:class:`~infersight.core.errors.MalformedStream` and nothing else.

Hot path: LF-only streams (what every engine sends) are cut into whole events with
one ``find(b"\\n\\n")`` per event; an event that is a single ``data: `` line is
decoded without walking its lines. Everything else (CR line endings, comments,
``event``/``id``/``retry`` fields, multi-line data) takes the general line walk.
"""

from __future__ import annotations

import re

import orjson

from infersight.client.sse_event import SSEEvent, analyse
from infersight.core.errors import MalformedStream

__all__ = ["SSEEvent", "SSEParser"]

_EOL = re.compile(rb"\r\n|\r|\n")
_DONE = b"[DONE]"


class SSEParser:
    """Incremental SSE parser: ``feed(bytes) -> [SSEEvent]``, ``close() -> [SSEEvent]``.

    Handles LF, CRLF and CR line endings (also a CRLF split across reads), comments and
    keep-alive lines, multi-line ``data``, and the ``event``, ``id`` and ``retry``
    fields. Blocks with no ``data`` line (comments, keep-alives) dispatch nothing.

    When one read holds good events followed by a malformed one, ``feed`` returns the
    good events and keeps the :class:`MalformedStream` in :attr:`error`; the next
    ``feed`` or ``close`` raises it. So nothing that arrived intact is lost, and the
    error is never skipped.
    """

    __slots__ = ("_buf", "_data", "_event", "_id", "_raw", "_retry", "_skip_lf", "error")

    def __init__(self) -> None:
        self._buf = b""
        self._raw = b""  # bytes of the current event from earlier reads
        self._data: list[bytes] = []
        self._event: str | None = None
        self._id: str | None = None
        self._retry: int | None = None
        self._skip_lf = False
        #: A MalformedStream found after good events of the same read (raised next).
        self.error: MalformedStream | None = None

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """Parse one read; return the events it completed (possibly none)."""
        if self.error is not None:
            raise self.error
        out: list[SSEEvent] = []
        if not chunk:
            return out
        try:
            self._feed(chunk, out)
        except MalformedStream as e:
            if not out:
                raise
            self.error = e
            self._buf = b""
        return out

    def close(self) -> list[SSEEvent]:
        """End of stream: finish a last event that lacks its blank line, if valid.

        An unfinished event whose payload does not decode is a cut stream, not a
        malformed one, so it is dropped (the caller decides about truncation).
        """
        if self.error is not None:
            raise self.error
        out: list[SSEEvent] = []
        if self._buf:
            tail = self._buf
            self._buf = b""
            cut = tail.rfind(b"\n")
            if cut >= 0 and 13 not in tail:  # whole lines of a block kept by the fast path
                self._lines_lf(tail, 0, cut + 1, out)
                tail = tail[cut + 1 :]
            if tail:
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

    # -- framing -----------------------------------------------------------------
    def _feed(self, chunk: bytes, out: list[SSEEvent]) -> None:
        if self._skip_lf:
            # The previous read ended with CR; a following LF belongs to that CRLF.
            self._skip_lf = False
            if chunk[0] == 10:
                chunk = chunk[1:]
                if not chunk:
                    return
        buf = self._buf + chunk if self._buf else chunk
        if 13 in chunk:
            self._buf = buf[self._lines_any(buf, out) :]
            return
        pos = 0
        if not self._data and not self._raw and self._event is None:
            # Between events: cut whole blocks; a lone "data: " line needs no walk.
            find = buf.find
            decode = self._decode
            while True:
                end = find(b"\n\n", pos)
                if end < 0:
                    break
                nxt = end + 2
                if buf.startswith(b"data: ", pos) and find(b"\n", pos, end) < 0:
                    out.append(decode(buf[pos + 6 : end], buf[pos:nxt], "message"))
                else:  # the block ends with a blank line: the state is clean after it
                    self._lines_lf(buf, pos, nxt, out)
                pos = nxt
            # An unfinished event stays whole in the buffer, so the next read cuts it
            # as a block too (TCP often splits events; rescanning a few bytes is cheap).
            self._buf = buf[pos:] if pos else buf
            return
        pos = self._lines_lf(buf, pos, len(buf), out)
        self._buf = buf[pos:] if pos else buf

    def _lines_lf(self, buf: bytes, pos: int, stop: int, out: list[SSEEvent]) -> int:
        """Walk the LF-terminated lines of ``buf[pos:stop]``, dispatching at blank lines.

        Returns the end of the last complete line; the lines of an event that is not
        finished yet are kept as parser state.
        """
        find = buf.find
        start = pos  # where the current event's bytes begin
        while True:
            end = find(b"\n", pos, stop)
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
        return self._keep(buf, start, pos)

    def _lines_any(self, buf: bytes, out: list[SSEEvent]) -> int:
        """Like :meth:`_lines_lf` for LF, CRLF and CR line endings."""
        pos = start = 0
        n = len(buf)
        for m in _EOL.finditer(buf):
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
        return self._keep(buf, start, pos)

    def _keep(self, buf: bytes, start: int, pos: int) -> int:
        """Keep the complete lines of an unfinished event (``buf[start:pos]``) as its raw
        bytes; returns ``pos``, where the unread rest begins."""
        if start < pos:
            self._raw += buf[start:pos]
        return pos

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

    # -- events ------------------------------------------------------------------
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
        return self._decode(data, raw, event)

    def _decode(self, data: bytes, raw: bytes, event: str) -> SSEEvent:
        ev = SSEEvent(data, raw, None, False, False, 0, event, self._id, self._retry)
        if data[:1] != b"{":
            if data == _DONE or data.strip() == _DONE:
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
        if obj.__class__ is not dict:
            raise MalformedStream(f"SSE data is not a JSON object: {data[:80]!r}")
        ev.json = obj
        analyse(ev, obj)
        return ev
