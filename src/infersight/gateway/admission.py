"""Admission control for one upstream: a concurrency limit plus a bounded priority queue.

A request either gets a slot at once, waits in the queue (FIFO within a priority;
higher priority first), or is refused with :class:`~infersight.core.errors.Shed`
carrying a ``retry_after`` computed from the measured drain rate. It is refused when
the queue is full, or when the predicted wait (its place in the queue divided by the
drain rate) would run past its deadline, because waiting then only wastes the
upstream's time on an answer nobody will read. Nothing is dropped silently: every
refusal raises, and every queued request either gets a slot or raises
:class:`~infersight.core.errors.DeadlineExceeded` at its deadline.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
import time
from collections import deque
from collections.abc import Callable

from infersight.core.errors import DeadlineExceeded
from infersight.gateway.errors import Shed
from infersight.gateway.limiter import Limiter, StaticLimit

__all__ = ["AdmissionController"]

#: Completions remembered for the drain-rate estimate.
_DRAIN_WINDOW = 128
#: A drain-rate measurement older than this is not trusted on its own.
_DRAIN_MAX_AGE_S = 30.0
_MAX_RETRY_AFTER_S = 300


def _ewma(old: float | None, sample: float) -> float:
    return sample if old is None else 0.8 * old + 0.2 * sample


class AdmissionController:
    """Concurrency limit + bounded queue + drain-rate based wait prediction."""

    def __init__(
        self,
        limiter: Limiter | None = None,
        queue_size: int = 128,
        *,
        clock: Callable[[], float] = time.monotonic,
        on_reject: Callable[[str], None] | None = None,
    ) -> None:
        self.limiter = limiter or StaticLimit(32)
        self.queue_size = queue_size
        self._clock = clock
        self._on_reject = on_reject
        self.inflight = 0
        self._heap: list[tuple[int, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()
        self._done_times: deque[float] = deque(maxlen=_DRAIN_WINDOW)
        self._lat_ewma: float | None = None
        #: Seconds a whole answer takes at the upstream (streams to their end): what a
        #: request needs after its wait, and what a slot is held for.
        self._whole_ewma: float | None = None
        self._answered_at: float | None = None

    # -- state ------------------------------------------------------------------------
    @property
    def limit(self) -> int:
        return self.limiter.limit

    @property
    def queued(self) -> int:
        return len(self._heap)

    def set_limit(self, limiter: Limiter) -> None:
        """Replace the limiter (``PUT /upstreams/{name}/limit``): a higher limit admits
        waiting requests at once; a lower one lets those in flight finish."""
        self.limiter = limiter
        self._wake()

    def drain_rate(self) -> float | None:
        """Completions per second: measured over recent completions, else limit/latency."""
        now = self._clock()
        d = self._done_times
        if len(d) >= 2 and now - d[-1] < _DRAIN_MAX_AGE_S:
            # Two views, take the lower: completions over their own span (bursty when
            # a batch finishes at once) and completions up to now (decays when idle).
            rates = [len(d) / (now - d[0])] if now > d[0] else []
            if d[-1] > d[0]:
                rates.append((len(d) - 1) / (d[-1] - d[0]))
            if rates:
                return min(rates)
        if hold := self._whole_ewma or self._lat_ewma:
            return self.limit / hold
        return None

    def predicted_wait(self, position: int) -> float | None:
        """Seconds until a request at queue ``position`` (1 = next) gets a slot."""
        rate = self.drain_rate()
        return None if not rate else position / rate

    def retry_after(self, position: int | None = None) -> int:
        """Whole seconds a refused client should wait (at least 1)."""
        pos = self.queued + 1 if position is None else position
        wait = self.predicted_wait(pos)
        if wait is None:
            return 1
        return int(min(_MAX_RETRY_AFTER_S, max(1, math.ceil(wait))))

    def cut_short(self, given: float) -> bool:
        """Whether a deadline that passed ``given`` seconds into an upstream call says
        nothing about the upstream (docs/design.md section 4): it had less time than a
        typical answer takes, mostly because the request spent its deadline in this
        queue. Feeding that to the limiter as congestion would shrink the limit, which
        lengthens the queue, which cuts the next deadlines shorter still: a spiral.
        With no typical latency learned yet the expiry counts, as it always did."""
        typical = self._lat_ewma
        return typical is not None and given < typical

    def answered_since(self, when: float) -> bool:
        """Whether the upstream finished a whole answer after ``when``: one that misses
        a deadline meanwhile is busy, not broken (docs/design.md section 4)."""
        return self._answered_at is not None and self._answered_at >= when

    # -- acquire / release ---------------------------------------------------------------
    def try_acquire(self) -> bool:
        """Take a slot without waiting, if one is free and nobody is queued."""
        if not self._heap and self.inflight < self.limit:
            self.inflight += 1
            return True
        return False

    async def acquire(self, deadline: float, priority: int = 0) -> float:
        """Wait for a slot; return the seconds spent queued.

        Raises Overloaded (queue full / predicted wait past the deadline) or
        DeadlineExceeded (the deadline passed while queued).
        """
        if self.try_acquire():
            return 0.0
        start = self._clock()
        if len(self._heap) >= self.queue_size:
            self._reject("queue_full")
            raise Shed(
                f"upstream queue full ({self.queue_size} waiting, {self.inflight} in flight)",
                code="queue_full",
                retry_after=self.retry_after(),
            )
        key = -priority
        position = 1 + sum(1 for k, _, _ in self._heap if k <= key)
        wait = self.predicted_wait(position)
        # The answer itself takes time after the wait: a request admitted with only the
        # wait in hand misses its deadline at the upstream, having spent its slot there.
        answer = self._whole_ewma or self._lat_ewma or 0.0
        if wait is not None and start + wait + answer > deadline:
            self._reject("predicted_wait")
            raise Shed(
                f"predicted queue wait {wait:.2f}s and a typical answer's {answer:.2f}s "
                f"exceed the request deadline ({max(0.0, deadline - start):.2f}s left)",
                code="predicted_wait_exceeds_deadline",
                retry_after=self.retry_after(position),
            )
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (key, next(self._seq), fut)
        heapq.heappush(self._heap, entry)
        try:
            async with asyncio.timeout(max(0.0, deadline - start)):
                await fut
        except BaseException as e:
            if fut.done() and not fut.cancelled():
                # The slot was granted just as we timed out or were cancelled: give it back.
                self.inflight -= 1
                self._wake()
            else:
                self._remove(entry)
            if isinstance(e, TimeoutError):
                self._reject("deadline")
                raise DeadlineExceeded(
                    f"deadline passed after {self._clock() - start:.2f}s in the gateway queue"
                ) from None
            raise
        return self._clock() - start

    def release(
        self, latency: float | None = None, *, dropped: bool = False, whole: float | None = None
    ) -> None:
        """Give the slot back; feed the limiter (``latency``: the sample it learns from,
        the time to first content on streams) and the drain-rate estimate. ``whole``:
        the seconds a complete answer took, to its last byte (None: not complete)."""
        self.inflight -= 1
        if whole is not None and whole >= 0:
            self._answered_at = self._clock()
            self._whole_ewma = _ewma(self._whole_ewma, whole)
        now = self._clock()
        self._done_times.append(now)
        if latency is not None and latency >= 0:
            # A failure's time is no answer's: a hang that ran to its deadline would
            # teach "typical" = the deadline, and the next hang would look cut short.
            if not dropped:
                self._lat_ewma = _ewma(self._lat_ewma, latency)
            self.limiter.on_sample(latency, self.inflight + 1, dropped)
        self._wake()

    def _wake(self) -> None:
        while self._heap and self.inflight < self.limit:
            _, _, fut = heapq.heappop(self._heap)
            if fut.done():
                continue
            self.inflight += 1
            fut.set_result(None)

    def _remove(self, entry: tuple[int, int, asyncio.Future[None]]) -> None:
        try:
            self._heap.remove(entry)
        except ValueError:
            return
        heapq.heapify(self._heap)

    def _reject(self, reason: str) -> None:
        if self._on_reject is not None:
            self._on_reject(reason)
