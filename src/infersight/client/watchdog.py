"""One lazy timer per response that raises time limits into its stream.

The timer is set for the earliest due time and, when it fires early (content arrived
meanwhile, so the due time moved), re-arms itself, so a content chunk costs one
comparison and no timer work. When a limit has passed it puts the typed timeout into
the aiohttp stream; the pending read raises it, whichever task is reading. Nothing
here holds the response after the timer is cancelled, so a finished response is
freed by reference counting, not by the cycle collector.
"""

from __future__ import annotations

import asyncio
import math
import time
from typing import Protocol

from aiohttp import StreamReader

from infersight.core import errors as E
from infersight.core.records import RequestRecord

__all__ = ["EOF_GRACE", "arm", "cancel"]

INF = math.inf
#: Seconds to wait for the end of the body after [DONE] before dropping the connection.
EOF_GRACE = 0.2


class Watched(Protocol):
    """What the timer reads of a response (a StreamResponse)."""

    record: RequestRecord
    _finished: bool
    _consumed: int
    _content: StreamReader
    _loop: asyncio.AbstractEventLoop
    _timer: asyncio.TimerHandle | None
    _timer_at: float
    _url: str
    _ft_due: float
    _body_at: float | None
    _idle: float | None
    _deadline: float
    _done: bool
    _done_at: float | None


def arm(r: Watched, due: float) -> None:
    """Make the timer fire no later than ``due`` (monotonic seconds)."""
    if due >= r._timer_at:
        return
    if r._timer is not None:
        r._timer.cancel()
    r._timer_at = due
    loop = r._loop
    r._timer = loop.call_at(loop.time() + max(0.0, due - time.monotonic()), _fire, r)


def cancel(r: Watched) -> None:
    if r._timer is not None:
        r._timer.cancel()
        r._timer = None
    r._timer_at = INF


def _fire(r: Watched) -> None:
    r._timer = None
    r._timer_at = INF
    if r._finished or r._content.is_eof():
        return  # everything has arrived: no limit can pass any more
    due, kind = _due(r)
    now = time.monotonic()
    if due - now > 0.0005:
        arm(r, due)
        return
    if kind is not E.DeadlineExceeded and r._content.total_bytes > r._consumed:
        # Data is waiting unread: the caller is slow, not the server.
        arm(r, now + 0.01)
        return
    r._content.set_exception(_timeout(r, kind))


def _due(r: Watched) -> tuple[float, type[E.Timeout]]:
    """The next time limit of the response, and the error it raises."""
    if r._done:  # only the end of the body is missing: wait a moment for it
        return (r._done_at or 0.0) + EOF_GRACE, E.IdleTimeout
    ct = r.record.chunk_times
    if ct:
        last: float | None = ct[-1]
    elif r._ft_due < r._deadline:
        return r._ft_due, E.FirstTokenTimeout
    else:
        last = r._body_at  # a non-streamed body: its last read (None for streams)
    if last is not None and r._idle is not None and last + r._idle < r._deadline:
        return last + r._idle, E.IdleTimeout
    return r._deadline, E.DeadlineExceeded


def _timeout(r: Watched, kind: type[E.Timeout]) -> E.Timeout:
    if r._done:
        return kind(f"the body from {r._url} did not end after [DONE]")
    if kind is E.FirstTokenTimeout:
        return kind(f"no content from {r._url} within the first-token limit")
    if kind is E.IdleTimeout:
        return kind(f"no content from {r._url} for {r._idle:g} s (idle limit)")
    return kind(f"the request to {r._url} passed its deadline")
