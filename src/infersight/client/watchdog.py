"""A lazy timer that raises time limits into a response stream.

It is armed once and, when it fires early (content arrived meanwhile), re-arms
itself for the new due time, so the per-chunk cost is nothing. When a limit has
passed it puts the typed timeout into the aiohttp stream; the pending read raises
it, whichever task is reading.
"""

from __future__ import annotations

import asyncio
import math
import time
from typing import Protocol

from aiohttp import StreamReader

from infersight.core import errors as E

__all__ = ["Watchdog"]


class Watched(Protocol):
    _finished: bool
    _consumed: int
    _content: StreamReader

    def _due(self) -> tuple[float, type[E.Timeout]]: ...

    def _timeout(self, kind: type[E.Timeout]) -> E.Timeout: ...


class Watchdog:
    """Raises the first-token, idle or deadline timeout into a response stream."""

    __slots__ = ("_handle", "_loop", "_r")

    def __init__(self, reader: Watched) -> None:
        self._r = reader
        self._loop = asyncio.get_running_loop()
        self._handle: asyncio.TimerHandle | None = None
        self.arm()

    def arm(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        due, _ = self._r._due()
        if due < math.inf:
            delay = max(0.0, due - time.monotonic())
            self._handle = self._loop.call_at(self._loop.time() + delay, self._fire)

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _fire(self) -> None:
        self._handle = None
        r = self._r
        if r._finished:
            return
        due, kind = r._due()
        now = time.monotonic()
        if due - now > 0.0005:
            self._handle = self._loop.call_at(self._loop.time() + (due - now), self._fire)
            return
        if kind is not E.DeadlineExceeded and r._content.total_bytes > r._consumed:
            # Data is waiting unread: the caller is slow, not the server.
            self._handle = self._loop.call_at(self._loop.time() + 0.01, self._fire)
            return
        r._content.set_exception(r._timeout(kind))
