"""Waiting for an intended send time: on time, never early, and without polling.

The open-loop dispatcher waits until each request's intended send time. uvloop's
timers count whole milliseconds (libuv), so a timer may fire up to ~1.5 ms early, and
waiting out the rest with ``sleep(0)`` polls the event loop (an iteration per turn)
until the instant has come: CPU spent on polling, and sends that start wherever the
polling happens to be, late by a fraction of a millisecond.

On Linux the :class:`Pacer` arms a ``timerfd`` (nanosecond resolution, the same
``CLOCK_MONOTONIC`` as ``time.monotonic()``) at the absolute send time and lets the
event loop watch its file descriptor: the loop sleeps in ``epoll`` until that instant
and wakes within the kernel's timer slack (50 µs by default). Elsewhere it sleeps on the
loop's own timer aimed 2 ms late, so it is never early and never polls.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import sys
import time
from typing import Any

__all__ = ["Pacer"]

_CLOCK_MONOTONIC = 1
_TFD_TIMER_ABSTIME = 1
_TFD_NONBLOCK = 0o4000
_TFD_CLOEXEC = 0o2000000
#: Without a timerfd: aim this late, past the loop timers' millisecond rounding.
_LATE = 0.002


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


class _TimerFd:
    """A non-blocking CLOCK_MONOTONIC timerfd (through libc: ``os`` has none before
    Python 3.13)."""

    def __init__(self) -> None:
        libc: Any = ctypes.CDLL(None, use_errno=True)
        fd = libc.timerfd_create(_CLOCK_MONOTONIC, _TFD_NONBLOCK | _TFD_CLOEXEC)
        if fd < 0:
            raise OSError(ctypes.get_errno(), "timerfd_create failed")
        self.fd: int = fd
        self._libc = libc
        self._spec = _Itimerspec()

    def arm(self, at: float) -> None:
        """Expire once at monotonic time ``at`` (seconds)."""
        sec = int(at)
        value = self._spec.it_value
        value.tv_sec, value.tv_nsec = sec, int((at - sec) * 1e9)
        if self._libc.timerfd_settime(self.fd, _TFD_TIMER_ABSTIME, ctypes.byref(self._spec), None):
            raise OSError(ctypes.get_errno(), "timerfd_settime failed")

    def clear(self) -> None:
        with contextlib.suppress(BlockingIOError, InterruptedError):
            os.read(self.fd, 8)

    def close(self) -> None:
        os.close(self.fd)


def _timerfd() -> _TimerFd | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return _TimerFd()
    except (OSError, AttributeError):
        return None


class Pacer:
    """``await pacer.until(at)`` returns at monotonic time ``at`` or just after it.

    One waiter at a time (the dispatcher); :meth:`close` when done.
    """

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._tfd = _timerfd()
        self._waiter: asyncio.Future[None] | None = None
        if self._tfd is not None:
            try:
                self._loop.add_reader(self._tfd.fd, self._expired)
            except (NotImplementedError, RuntimeError, ValueError, OSError):
                self._tfd.close()
                self._tfd = None

    @property
    def precise(self) -> bool:
        """True when waits end within microseconds (timerfd), not milliseconds."""
        return self._tfd is not None

    def _expired(self) -> None:
        assert self._tfd is not None
        self._tfd.clear()
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    async def until(self, at: float) -> None:
        """Wait until monotonic time ``at`` (returns at once if it has passed)."""
        while (delay := at - time.monotonic()) > 0:
            if self._tfd is None:
                await asyncio.sleep(delay + _LATE)
                continue
            self._waiter = self._loop.create_future()
            self._tfd.arm(at)
            try:
                await self._waiter
            finally:
                self._waiter = None

    def close(self) -> None:
        if self._tfd is not None:
            with contextlib.suppress(RuntimeError, ValueError, OSError):
                self._loop.remove_reader(self._tfd.fd)
            self._tfd.close()
            self._tfd = None
