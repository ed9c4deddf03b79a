"""Reading one response: the SSE loop that fills the RequestRecord.

The hot path is :meth:`StreamResponse._read`: one ``readany()``, one clock read, the
parser, and a few list appends per content event. Time limits after the headers are
kept by a lazy watchdog timer that re-arms itself instead of being rescheduled per
chunk; when a limit passes it puts a typed timeout into the response stream, which
the pending read then raises, whichever task is reading.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

import aiohttp

from infersight.client.errors_map import error_from_event, map_transport_error
from infersight.client.outcome import (
    fail_record,
    mark_cancelled,
    merge_tool_calls,
    merged_response,
    parse_body,
    settle_tokens,
)
from infersight.client.sse import SSEEvent, SSEParser
from infersight.client.types import Completion
from infersight.client.watchdog import Watchdog
from infersight.core import errors as E
from infersight.core.records import RequestRecord

__all__ = ["StreamResponse", "fail_record", "mark_cancelled"]

INF = math.inf
#: Seconds to wait for the end of the body after [DONE] before dropping the connection.
_EOF_GRACE = 0.2
_SSE_STARTS = (b"data:", b"event", b": ", b":ok", b"id: ", b"retry")


class StreamResponse:
    """An open response: status, headers, the record, and its events.

    Obtained from ``Client.stream()``; iterate :meth:`events` (it replays the events
    already read while waiting for the first content). The record is finished when
    iteration ends: ok, or failed with the raised error.
    """

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
    ) -> None:
        self.status: int = resp.status
        self.headers: Mapping[str, str] = resp.headers
        self.record = record
        self._resp = resp
        self._content = resp.content
        self._url = url
        self._key = key
        self._ft_due = sent_at + first_token if first_token is not None else INF
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
        self._text: list[str] = []
        self._tool_calls: dict[int, dict[str, Any]] = {}
        self.finish_reason: str | None = None
        self.usage: dict[str, Any] | None = None
        self.response: dict[str, Any] | None = None
        self._last_json: dict[str, Any] | None = None
        self._dog = Watchdog(self)

    # -- time limits -------------------------------------------------------------
    def _due(self) -> tuple[float, type[E.Timeout]]:
        ct = self.record.chunk_times
        if not ct:
            if self._ft_due < self._deadline:
                return self._ft_due, E.FirstTokenTimeout
        elif self._idle is not None and ct[-1] + self._idle < self._deadline:
            return ct[-1] + self._idle, E.IdleTimeout
        return self._deadline, E.DeadlineExceeded

    def _timeout(self, kind: type[E.Timeout]) -> E.Timeout:
        if kind is E.FirstTokenTimeout:
            return kind(f"no content from {self._url} within the first-token limit")
        if kind is E.IdleTimeout:
            return kind(f"no content from {self._url} for {self._idle:g} s (idle limit)")
        return kind(f"the request to {self._url} passed its deadline")

    # -- reading -----------------------------------------------------------------
    async def _read(self) -> None:
        try:
            data = await self._content.readany()
        except E.InfersightError:
            raise
        except (TimeoutError, aiohttp.ClientError, OSError) as e:
            raise map_transport_error(
                e, url=self._url, before_content=not self.record.chunk_times
            ) from None
        t = time.monotonic()
        if data:
            if not self.is_sse and not self._consumed and data.lstrip()[:5] in _SSE_STARTS:
                self.is_sse = True  # an SSE stream served without its Content-Type
            self._consumed += len(data)
            if self.is_sse:
                evs = self._parser.feed(data)
            else:
                self._pending.append(SSEEvent(data))  # body piece; decoded at EOF
                return
        else:
            self._eof = True
            if not self.is_sse:
                self._body_done(t)
                return
            evs = self._parser.close()
        if not evs:
            return
        rec = self.record
        first = not rec.chunk_times
        for i, ev in enumerate(evs):
            if ev.has_content:
                rec.chunk_times.append(t)
                rec.chunk_tokens.append(ev.n_tokens)
                if ev.text:
                    self._text.append(ev.text)
                if ev.tool_calls:
                    merge_tool_calls(self._tool_calls, ev.tool_calls)
            if ev.json is not None:
                if ev.error is not None:
                    self._error = error_from_event(ev.error, self.status, self._key)
                    evs = evs[:i]
                    break
                if ev.finish_reason is not None:
                    self.finish_reason = ev.finish_reason
                if ev.usage is not None:
                    self.usage = ev.usage
                self._last_json = ev.json
            elif ev.done:
                self._done = True
                self._done_at = t
            elif ev.error is not None:
                self._error = error_from_event(ev.error, self.status, self._key)
                evs = evs[:i]
                break
        self._pending.extend(evs)
        if first and rec.chunk_times and self._idle is not None:
            self._dog.arm()

    async def _prime(self) -> None:
        """Read until the first content event, an error, or the end (before retries end)."""
        try:
            while not self.record.chunk_times and not self._eof and self._error is None:
                await self._read()
            if self._error is not None and not self.record.chunk_times:
                err, self._error = self._error, None
                raise err
        except BaseException:
            self.close()
            raise

    async def _drain(self) -> None:
        """Read to the end without yielding events (used by ``Client.request``)."""
        try:
            while not self._eof and self._error is None:
                if self._done:
                    await self._finish_eof()
                    break
                await self._read()
                if self.is_sse:
                    self._pending.clear()
        except E.InfersightError as e:
            raise self._fail(e) from None
        except asyncio.CancelledError:
            mark_cancelled(self.record)
            self.close()
            raise
        self._settle()

    async def _finish_eof(self) -> None:
        """After [DONE], read the body's end so the connection can be reused.

        Never wait long: some servers hold the stream open after [DONE]; then the
        connection is dropped instead. Errors after [DONE] do not matter.
        """
        try:
            if not self._content.is_eof():
                async with asyncio.timeout(_EOF_GRACE):
                    while not self._eof:
                        await self._read()
            while not self._eof:
                await self._read()  # the rest is buffered: no wait
        except (E.InfersightError, TimeoutError):
            self._eof = True
            self._resp.close()

    async def events(self) -> AsyncIterator[SSEEvent]:
        """Every event of the answer, starting with those read before entering."""
        try:
            while True:
                if self._pending:
                    evs, self._pending = self._pending, []
                    for ev in evs:
                        yield ev
                if self._error is not None or self._eof:
                    break
                if self._done:
                    await self._finish_eof()
                    break
                await self._read()
        except E.InfersightError as e:
            raise self._fail(e) from None
        except GeneratorExit:
            self.close()  # the caller stopped iterating: ok after [DONE], else cancelled
            raise
        except asyncio.CancelledError:
            mark_cancelled(self.record)
            self.close()
            raise
        self._settle()

    def _fail(self, e: E.InfersightError) -> E.InfersightError:
        self._finished = True
        self._dog.cancel()
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
        self._dog.cancel()
        self._resp.release()
        rec.end = self._done_at if self._done_at is not None else time.monotonic()
        rec.finish_reason = self.finish_reason
        settle_tokens(rec, self.usage, estimated_ok=self.is_sse)
        rec.ok = True
        rec.error = None

    def close(self) -> None:
        """Drop the connection if the answer was not read to the end.

        A caller that stops after ``[DONE]`` or the finish_reason has a complete
        answer (ok); one that stops earlier cancelled it.
        """
        self._dog.cancel()
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
        obj, texts, finish, usage = parse_body(body, self._url)
        err = obj.get("error")
        if err and "choices" not in obj and "data" not in obj:
            # An error wrapped in a 200 answer (some proxies and servers do this).
            raise error_from_event(
                err if isinstance(err, dict) else {"message": str(err)}, self.status, self._key
            )
        self._text.extend(texts)
        self.finish_reason = finish
        self.usage = usage
        self.response = obj
        n = usage.get("completion_tokens") if usage else None
        n_tokens = n if isinstance(n, int) and n > 0 else 1
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
