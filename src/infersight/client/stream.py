"""Reading one response: the SSE loop that fills the RequestRecord.

The hot path is :meth:`StreamResponse._read`: one ``readany()``, one clock read, the
parser, and a few list appends per content event. Time limits after the headers are
kept by one lazy timer (:mod:`.watchdog`) that re-arms itself instead of being
rescheduled per chunk; when a limit passes it puts a typed timeout into the response
stream, which the pending read then raises, whichever task is reading.

Iterating the events, or the bytes for passthrough (:meth:`StreamResponse.raw_chunks`:
one bytes object per read holding that read's whole events exactly as received), is
:mod:`.iterate`'s job.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

import aiohttp

from infersight.client.errors_map import error_from_event, map_transport_error
from infersight.client.iterate import iter_events, iter_raw
from infersight.client.outcome import (
    fail_record,
    mark_cancelled,
    merge_tool_calls,
    merged_response,
    settle_tokens,
    whole_body,
)
from infersight.client.sse import SSEEvent, SSEParser
from infersight.client.types import Completion
from infersight.client.watchdog import arm, cancel
from infersight.core import errors as E
from infersight.core.records import RequestRecord

__all__ = ["StreamResponse", "fail_record", "mark_cancelled"]

INF = math.inf
_SSE_STARTS = (b"data:", b"event", b": ", b":ok", b"id: ", b"retry")


class StreamResponse:
    """An open response: status, headers, the record, and its events.

    Obtained from ``Client.stream()``; iterate :meth:`events` (it replays the events
    already read while waiting for the first content), or :meth:`raw_chunks` to pass
    the bytes through. The record is finished when iteration ends: ok, or failed with
    the raised error.
    """

    __slots__ = (
        "_body_at",
        "_chunk_usage",
        "_consumed",
        "_content",
        "_counted",
        "_deadline",
        "_done",
        "_done_at",
        "_eof",
        "_error",
        "_finished",
        "_ft_due",
        "_idle",
        "_key",
        "_last_json",
        "_loop",
        "_parser",
        "_pending",
        "_resp",
        "_text",
        "_timer",
        "_timer_at",
        "_tool_calls",
        "_url",
        "finish_reason",
        "headers",
        "is_sse",
        "record",
        "response",
        "status",
        "usage",
    )

    def __init__(
        self,
        resp: aiohttp.ClientResponse,
        record: RequestRecord,
        *,
        url: str,
        sent_at: float,
        first_token: float | None,
        idle: float | None,
        deadline: float,
        key: str | None,
        loop: asyncio.AbstractEventLoop,
        streamed: bool = True,
    ) -> None:
        self.status: int = resp.status
        self.headers: Mapping[str, str] = resp.headers
        self.record = record
        self._resp = resp
        self._content = resp.content
        self._url = url
        self._key = key
        self._ft_due = sent_at + first_token if first_token is not None else INF
        #: Non-streamed: when the last byte of the body (first: the head) arrived. The
        #: head is the answer's first byte, so the first-token limit has been met and
        #: the idle limit bounds each gap in the body.
        self._body_at: float | None = None
        if not streamed:
            self._ft_due = INF
            self._body_at = time.monotonic()
        self._idle = idle
        self._deadline = deadline
        ctype = resp.headers.get("Content-Type", "")
        self.is_sse = ctype.startswith("text/event-stream")
        self._parser = SSEParser()
        self._pending: list[SSEEvent] = []
        self._error: E.InfersightError | None = None
        self._eof = False
        self._finished = False
        self._done = False
        self._done_at: float | None = None
        self._consumed = 0
        self._counted = 0
        #: completion_tokens of the last content or finishing chunk that carried usage.
        self._chunk_usage: int | None = None
        self._text: list[str] = []
        self._tool_calls: dict[int, dict[str, Any]] = {}
        self.finish_reason: str | None = None
        self.usage: dict[str, Any] | None = None
        self.response: dict[str, Any] | None = None
        self._last_json: dict[str, Any] | None = None
        self._loop = loop
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = INF
        due = self._ft_due if self._ft_due < deadline else deadline
        if self._body_at is not None and idle is not None:
            due = min(due, self._body_at + idle)
        if due < INF:
            arm(self, due)

    # -- reading -----------------------------------------------------------------
    async def _read(self) -> list[SSEEvent] | None:
        """One read: parse it, fill the record; returns the read's events (SSE only)."""
        try:
            data = await self._content.readany()
        except E.InfersightError:
            raise
        except (TimeoutError, aiohttp.ClientError, OSError) as e:
            raise map_transport_error(
                e, url=self._url, before_content=not self.record.chunk_times
            ) from None
        t = time.monotonic()
        parser = self._parser
        if data:
            if not self.is_sse:
                if self._consumed or data.lstrip()[:5] not in _SSE_STARTS:
                    self._body_at = t
                    self._consumed += len(data)
                    self._pending.append(SSEEvent(data))  # body piece; decoded at EOF
                    return None
                self.is_sse = True  # an SSE stream served without its Content-Type
            self._consumed += len(data)
            evs = parser.feed(data)
        else:
            self._eof = True
            if not self.is_sse:
                self._body_done(t)
                return None
            evs = parser.close()
        if parser.error is not None and self._error is None:
            self._error = parser.error  # raised after this read's good events
        if not evs:
            return evs
        rec = self.record
        times = rec.chunk_times
        first = not times
        for i, ev in enumerate(evs):
            if ev.has_content:
                times.append(t)
                n = ev.n_tokens
                ct = ev.so_far
                if ct is not None:
                    # The count so far in a content chunk (vLLM's continuous usage,
                    # llama.cpp's timings): a chunk may carry several tokens.
                    self._chunk_usage = ct
                    if ct > self._counted:
                        n = ct - self._counted
                self._counted += n
                rec.chunk_tokens.append(n)
                if ev.text:
                    self._text.append(ev.text)
                if ev.tool_calls:
                    merge_tool_calls(self._tool_calls, ev.tool_calls)
            elif ev.so_far is not None and self._chunk_usage is not None:
                # the finishing chunk (vLLM) or the usage-only one (llama.cpp): tokens
                # that never reached a content chunk go to the last one
                self._chunk_usage = ev.so_far
            js = ev.json
            if js is not None:
                if ev.error is not None:
                    self._error = error_from_event(ev.error, self.status, self._key)
                    evs = evs[:i]
                    break
                if ev.finish_reason is not None:
                    self.finish_reason = ev.finish_reason
                if ev.usage is not None:
                    self.usage = ev.usage
                self._last_json = js
            elif ev.done:
                self._done = True
                self._done_at = t
            elif ev.error is not None:
                self._error = error_from_event(ev.error, self.status, self._key)
                evs = evs[:i]
                break
        if self._done and self._error is parser.error:
            # The malformed bytes came after [DONE] in the same read: the answer is
            # complete, as when they come in a later read (see iterate.finish_eof).
            self._error = None
        if first and times and self._idle is not None:
            arm(self, t + self._idle)
        return evs

    def events(self) -> AsyncIterator[SSEEvent]:
        """Every event of the answer, starting with those read before entering."""
        return iter_events(self)

    def raw_chunks(self, *, drop_usage_only: bool = False) -> AsyncIterator[bytes]:
        """Passthrough: the answer's bytes, one piece per read, cut at event boundaries.

        Each piece is the whole events that read completed, exactly as received
        (keep-alive comments dropped), so a proxy forwards them with one write per read
        and never splits an event. The events already read before entering come first,
        as one piece. The record, ``finish_reason``, ``usage`` and :attr:`done` are
        filled as with :meth:`events`; an error event is not passed on but raised
        (typed), after the good events before it. ``drop_usage_only`` leaves out the
        usage-only event (no ``choices``) that ``include_usage`` adds, for callers
        that did not ask for it. A non-SSE body comes as one piece.
        """
        return iter_raw(self, drop_usage_only)

    @property
    def done(self) -> bool:
        """True once ``[DONE]`` arrived (or a non-streamed body was read)."""
        return self._done

    def _fail(self, e: E.InfersightError) -> E.InfersightError:
        self._finished = True
        cancel(self)
        self._resp.close()
        return fail_record(self.record, e)

    def _settle(self) -> None:
        """The answer ended: decide ok, fill tokens, or raise the stream's error."""
        rec = self.record
        if self._error is not None:
            raise self._fail(self._error)
        if not (self._done or self.finish_reason is not None):
            n = len(rec.chunk_times)
            raise self._fail(
                E.TruncatedStream(
                    f"the stream from {self._url} ended after {n} content chunks without "
                    "[DONE] or a finish_reason"
                )
            )
        self._finished = True
        cancel(self)
        self._resp.release()
        rec.end = self._done_at if self._done_at is not None else time.monotonic()
        rec.finish_reason = self.finish_reason
        left = (self._chunk_usage or 0) - self._counted
        if left > 0 and rec.chunk_tokens:
            # Tokens that made no text yet (part of a character) come with the finishing
            # chunk, which has no content: they arrived with the last one that had.
            rec.chunk_tokens[-1] += left
        settle_tokens(rec, self.usage, estimated_ok=self.is_sse)
        rec.ok = True
        rec.error = None

    def close(self) -> None:
        """Drop the connection if the answer was not read to the end.

        A caller that stops after ``[DONE]`` or the finish_reason has a complete
        answer (ok); one that stops earlier cancelled it.
        """
        cancel(self)
        if self._finished:
            return
        if self._error is None and (self._done or self.finish_reason is not None):
            self._eof = True
            try:
                self._settle()
            finally:
                self._resp.close()
            return
        self._finished = True
        self._resp.close()
        if self.record.end is None and self.record.error is None:
            mark_cancelled(self.record)

    # -- results -----------------------------------------------------------------
    @property
    def text(self) -> str:
        return "".join(self._text)

    def _body_done(self, t: float) -> None:
        """A non-streamed answer: the whole body is the one chunk."""
        body = b"".join(ev.data for ev in self._pending)
        obj, texts, self.finish_reason, self.usage, n_tokens = whole_body(
            body, self._url, self.status, self._key
        )
        self._text.extend(texts)
        self.response = obj
        self._pending = [SSEEvent(body, body, json=obj, has_content=True, n_tokens=n_tokens)]
        self.record.chunk_times.append(t)
        self.record.chunk_tokens.append(n_tokens)
        self._done = True
        self._done_at = t

    def completion(self) -> Completion:
        """The finished answer (after the stream was read to the end)."""
        response = self.response
        if response is None and self.is_sse:
            response = merged_response(
                self._last_json or {}, self.text, self._tool_calls, self.finish_reason, self.usage
            )
        return Completion(
            record=self.record,
            text=self.text,
            finish_reason=self.finish_reason,
            usage=self.usage,
            response=response,
            status=self.status,
            headers=self.headers,
        )
