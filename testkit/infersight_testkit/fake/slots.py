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


class Holder:
    """One request's hold on a slot and its KV tokens (on demand: what it has computed)."""

    __slots__ = ("need", "order", "preempted", "recompute")

    def __init__(self, need: int, order: int) -> None:
        self.need = need
        self.order = order
        #: Evicted to make room (on-demand KV): it waits at the head of the queue.
        self.preempted = False
        #: Tokens to recompute when it is admitted again (its prompt and answer so far).
        self.recompute = 0


class SlotPool:
    """At most ``slots`` holders at once (None: unlimited); the rest wait FIFO.

    With ``kv_capacity`` (tokens) a holder also reserves its ``need`` of KV tokens
    (prompt plus answer) for as long as it holds its slot, and a request is admitted
    only when a slot is free AND its need fits beside what the holders reserved. A
    waiter that does not fit blocks those behind it (head-of-line, like an engine's
    FIFO scheduler). A need larger than the whole capacity runs alone, once nothing
    else holds a slot, so no request can wait forever.

    A freed slot is handed straight to the oldest waiter, so a late arrival can never
    overtake the queue (``asyncio.Semaphore`` gives no such promise).
    """

    def __init__(
        self, slots: int | None, kv_capacity: int | None = None, kv_mode: str = "reserve"
    ) -> None:
        if slots is not None and slots < 1:
            raise ConfigError("slots must be at least 1")
        if kv_capacity is not None and kv_capacity < 1:
            raise ConfigError("kv_capacity must be at least 1")
        self.slots = slots
        self.kv_capacity = kv_capacity
        #: "reserve": a holder's need is held from admission; "on_demand": only its
        #: prompt at admission, then each token it makes (``grow``), and the latest
        #: admitted holder is evicted (preempted) when none is free, as vLLM does.
        self.kv_mode = kv_mode
        self.preemptions = 0
        self._holders: list[Holder] = []
        self._seq = 0
        self.running = 0
        #: KV tokens reserved by the holders (prompt + answer of each).
        self.reserved = 0
        #: The most holders and the most reserved KV tokens seen at once.
        self.peak_running = 0
        self.peak_reserved = 0
        self._waiters: collections.deque[tuple[asyncio.Future[Holder], int]] = collections.deque()
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

    def kv_usage(self) -> float:
        """Reserved KV tokens over the capacity (0 without a capacity), at most 1."""
        if not self.kv_capacity:
            return 0.0
        return min(1.0, self.reserved / self.kv_capacity)

    def _fits(self, need: int) -> bool:
        if self.slots is not None and self.running >= self.slots:
            return False
        if self.kv_capacity is None or self.running == 0:
            return True
        return self.reserved + need <= self.kv_capacity

    def _take(self, need: int) -> Holder:
        if self.running == 0:
            self._busy_since = time.monotonic()
        self.running += 1
        self.reserved += need
        self._seq += 1
        h = Holder(need, self._seq)
        self._holders.append(h)
        self.peak_running = max(self.peak_running, self.running)
        self.peak_reserved = max(self.peak_reserved, self.reserved)
        return h

    def _dispatch(self) -> None:
        """Admit waiters from the head of the queue while they fit."""
        while self._waiters:
            fut, need = self._waiters[0]
            if fut.done():  # cancelled while waiting
                self._waiters.popleft()
                continue
            if not self._fits(need):
                return
            self._waiters.popleft()
            fut.set_result(self._take(need))

    async def acquire(self, need: int = 0, *, first: bool = False) -> Holder:
        """Wait for a slot and ``need`` KV tokens (FIFO; ``first``: at the head of the
        queue, as a preempted request goes back). Cancellation while waiting leaves
        the queue clean; release the holder returned."""
        if (first or not self._waiters) and self._fits(need):
            return self._take(need)
        fut: asyncio.Future[Holder] = asyncio.get_running_loop().create_future()
        entry = (fut, need)
        if first:
            self._waiters.appendleft(entry)
        else:
            self._waiters.append(entry)
        try:
            return await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                # The slot was handed over just as the waiter left: pass it on.
                self.release(fut.result())
            else:
                if entry in self._waiters:
                    self._waiters.remove(entry)
                # the head may have been the one that did not fit
                self._dispatch()
            raise

    def _drop(self, h: Holder) -> None:
        if h in self._holders:
            self._holders.remove(h)
            self.running -= 1
            self.reserved -= h.need

    async def grow(self, h: Holder, tokens: int) -> Holder:
        """On-demand KV: ``h`` made ``tokens`` more. Where they do not fit, the latest
        admitted holder is preempted (it may be ``h``); a preempted holder waits at the
        head of the queue for its prompt and answer so far, and comes back as a new
        holder whose ``recompute`` says how many tokens it prefills again."""
        if self.kv_mode != "on_demand" or self.kv_capacity is None or tokens <= 0:
            return h
        while not h.preempted and self.reserved + tokens > self.kv_capacity and self.running > 1:
            victim = max(self._holders, key=lambda x: x.order)
            victim.preempted = True
            victim.recompute = victim.need
            self.preemptions += 1
            self._drop(victim)
            self._dispatch()
        if h.preempted:
            back = await self.acquire(h.recompute + tokens, first=True)
            back.recompute = h.recompute
            return back
        h.need += tokens
        self.reserved += tokens
        self.peak_reserved = max(self.peak_reserved, self.reserved)
        return h

    def release(self, h: Holder | int = 0) -> None:
        """Free a slot and its KV tokens: the oldest waiters that now fit get them. A
        holder already preempted holds nothing."""
        if isinstance(h, Holder):
            if h.preempted and h not in self._holders:
                return
            self._drop(h)
        else:  # a bare count (tests of the queue alone)
            self.running -= 1
            self.reserved -= h
            same = [x for x in self._holders if x.need == h] or self._holders[:1]
            if same:
                self._holders.remove(same[0])
        self._dispatch()
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
            "kv_capacity": self.kv_capacity,
            "kv_reserved": self.reserved,
            "peak_running": self.peak_running,
            "peak_kv_reserved": self.peak_reserved,
            "kv_mode": self.kv_mode,
            "preemptions": self.preemptions,
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
