"""The fake server's engine model: N generation slots with a FIFO wait queue.

A real engine (vLLM ``--max-num-seqs``, llama.cpp ``--parallel``) runs at most S
sequences at once; the others wait in order of arrival. :class:`SlotPool` is that
queue, inside the server, so a request's wait is real: it is held before its response
headers, as an engine holds it before the first token. Every generation request's
timeline (arrival, slot start, end) is kept so tests can compare what a client reports
against what the server really did (``queue_waits`` and ``timelines`` in its stats,
in finishing order, on the host's monotonic clock, which the client shares).
"""

from __future__ import annotations

import asyncio
import collections
import time
from typing import Any

from infersight.core.errors import ConfigError

__all__ = ["SlotPool", "record_timeline"]

#: The most timelines kept (a long soak must not grow the server without bound).
_KEEP = 100_000


class SlotPool:
    """At most ``slots`` holders at once (None: unlimited); the rest wait FIFO.

    A released slot is handed straight to the oldest waiter, so a late arrival can
    never overtake the queue (``asyncio.Semaphore`` gives no such promise).
    """

    def __init__(self, slots: int | None) -> None:
        if slots is not None and slots < 1:
            raise ConfigError("slots must be at least 1")
        self.slots = slots
        self.running = 0
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        # Seconds during which at least one slot was busy (a decode loop was running).
        self._busy_s = 0.0
        self._busy_since: float | None = None

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    def busy_seconds(self, now: float | None = None) -> float:
        """Total time with at least one slot busy, up to ``now``."""
        extra = 0.0
        if self._busy_since is not None:
            extra = (now if now is not None else time.monotonic()) - self._busy_since
        return self._busy_s + extra

    def _take(self) -> None:
        if self.running == 0:
            self._busy_since = time.monotonic()
        self.running += 1

    async def acquire(self) -> None:
        """Wait for a slot (FIFO). Cancellation while waiting leaves the queue clean."""
        if (self.slots is None or self.running < self.slots) and not self._waiters:
            self._take()
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                # The slot was handed over just as the waiter left: pass it on.
                self.release()
            else:
                self._waiters.remove(fut)
            raise

    def release(self) -> None:
        """Free a slot: the oldest waiter gets it, or the pool shrinks."""
        while self._waiters:
            fut = self._waiters.popleft()
            if not fut.done():
                fut.set_result(None)  # the slot moves to it; running is unchanged
                return
        self.running -= 1
        if self.running == 0 and self._busy_since is not None:
            self._busy_s += time.monotonic() - self._busy_since
            self._busy_since = None

    def gauges(self) -> dict[str, Any]:
        """The pool's state now (for ``/_fake/stats``)."""
        return {
            "slots": self.slots,
            "running": self.running,
            "waiting": self.waiting,
            "busy_seconds": self.busy_seconds(),
        }


def record_timeline(stats: dict[str, Any], arrival: float, start: float, end: float) -> None:
    """Keep one generation's true ``queue_waits`` entry and [arrival, start, end]."""
    waits: list[float] = stats["queue_waits"]
    lines: list[list[float]] = stats["timelines"]
    waits.append(start - arrival)
    lines.append([arrival, start, end])
    if len(lines) > _KEEP:
        del lines[: len(lines) - _KEEP]
        del waits[: len(waits) - _KEEP]
