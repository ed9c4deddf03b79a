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

__all__ = ["arm", "cancel"]

INF = math.inf


class Watched(Protocol):
    _finished: bool
    _consumed: int
    _content: StreamReader
    _loop: asyncio.AbstractEventLoop
    _timer: asyncio.TimerHandle | None
    _timer_at: float

    def _due(self) -> tuple[float, type[E.Timeout]]: ...

    def _timeout(self, kind: type[E.Timeout]) -> E.Timeout: ...


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
    due, kind = r._due()
    now = time.monotonic()
    if due - now > 0.0005:
        arm(r, due)
        return
    if kind is not E.DeadlineExceeded and r._content.total_bytes > r._consumed:
        # Data is waiting unread: the caller is slow, not the server.
        arm(r, now + 0.01)
        return
    r._content.set_exception(r._timeout(kind))
