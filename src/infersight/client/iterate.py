"""Reading an open response: up to its first content (``prime``, while retries are
still allowed), then to its end: its events, its bytes for passthrough, or nothing but
the record (``drain``).

Events and bytes start with what was read before the caller entered (the retries end at the
first content), then read to the end; the record is finished when iteration ends:
ok, or failed with the raised error. A caller that stops early cancels the request
(unless ``[DONE]`` or the finish_reason already arrived).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Protocol

from aiohttp import ClientResponse

from infersight.client.outcome import mark_cancelled
from infersight.client.sse import SSEEvent
from infersight.client.watchdog import EOF_GRACE, Watched, arm
from infersight.core import errors as E

__all__ = ["ReadStream", "drain", "finish_eof", "iter_events", "iter_raw", "join_raw", "prime"]


class ReadStream(Watched, Protocol):
    """What the readers use of a response: :class:`infersight.client.stream.StreamResponse`
    (a protocol here, so that the two modules do not import each other)."""

    is_sse: bool
    _resp: ClientResponse
    _error: E.InfersightError | None
    _eof: bool
    _pending: list[SSEEvent]

    async def _read(self) -> list[SSEEvent] | None: ...
    def _fail(self, e: E.InfersightError) -> E.InfersightError: ...
    def _settle(self) -> None: ...
    def close(self) -> None: ...


class _Ending:
    """``with _Ending(sr):`` around a read loop: a typed error fails the record, and a
    caller that leaves (GeneratorExit) or is cancelled closes the response."""

    __slots__ = ("sr",)

    def __init__(self, sr: ReadStream) -> None:
        self.sr = sr

    def __enter__(self) -> None:
        return None

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: object) -> None:
        if e is None:
            return
        sr = self.sr
        if isinstance(e, E.InfersightError):
            raise sr._fail(e) from None
        if isinstance(e, asyncio.CancelledError):
            mark_cancelled(sr.record)
            sr.close()
        elif isinstance(e, GeneratorExit):
            sr.close()  # the caller stopped iterating: ok after [DONE], else cancelled


async def _next_read(sr: ReadStream) -> list[SSEEvent] | None:
    """The next read's events ([] for none), or None once the answer has ended."""
    if sr._error is not None or sr._eof:
        return None
    if sr._done:
        await finish_eof(sr)
        return None
    return await sr._read() or []


async def prime(sr: ReadStream) -> None:
    """Read until the first content event, an error, or the end (before retries end);
    what was read is replayed to the caller (``sr._pending``)."""
    try:
        while not sr.record.chunk_times and not sr._eof and sr._error is None:
            evs = await sr._read()
            if evs:
                sr._pending.extend(evs)
        if sr._error is not None and not sr.record.chunk_times:
            err, sr._error = sr._error, None
            raise err
    except BaseException:
        sr.close()
        raise


async def drain(sr: ReadStream) -> None:
    """Read to the end without yielding events (``Client.request``)."""
    read = sr._read
    with _Ending(sr):
        # _next_read, inlined: this loop runs once per streamed token.
        while sr._error is None and not sr._eof:
            if sr._done:
                await finish_eof(sr)
                break
            await read()
    sr._settle()


async def finish_eof(sr: ReadStream) -> None:
    """After [DONE], read the body's end so the connection can be reused.

    Never wait long: some servers hold the stream open after [DONE]; then the
    connection is dropped instead (the response's timer, see :mod:`.watchdog`).
    Errors after [DONE] do not matter.
    """
    try:
        if not sr._content.is_eof():
            arm(sr, (sr._done_at or time.monotonic()) + EOF_GRACE)
        while not sr._eof:
            await sr._read()
    except E.InfersightError:
        sr._eof = True
        sr._resp.close()


async def iter_events(sr: ReadStream) -> AsyncIterator[SSEEvent]:
    """Every event of the answer, starting with those read before entering."""
    with _Ending(sr):
        if sr._pending:
            evs, sr._pending = sr._pending, []
            for ev in evs:
                yield ev
        while (got := await _next_read(sr)) is not None:
            for ev in got:
                yield ev
    sr._settle()


async def iter_raw(sr: ReadStream, drop_usage_only: bool) -> AsyncIterator[bytes]:
    """The answer's bytes, one piece per read (see ``StreamResponse.raw_chunks``)."""
    with _Ending(sr):
        if sr._pending:
            evs, sr._pending = sr._pending, []
            piece = join_raw(evs, drop_usage_only) if sr.is_sse else evs[0].raw
            if piece:
                yield piece
        while (got := await _next_read(sr)) is not None:
            if got:
                piece = join_raw(got, drop_usage_only)
                if piece:
                    yield piece
    sr._settle()


def join_raw(evs: list[SSEEvent], drop_usage_only: bool) -> bytes:
    """The bytes of a read's events, in order (without the usage-only event when
    ``drop_usage_only``)."""
    if len(evs) == 1 and not drop_usage_only:
        return evs[0].raw
    return b"".join(
        ev.raw
        for ev in evs
        if not (drop_usage_only and ev.usage is not None and ev.json and not ev.json.get("choices"))
    )
