"""Concurrency limits per upstream: static, AIMD, or gradient (latency-driven).

The adaptive limiters look for the knee on their own: while latency stays near the
no-load latency, more concurrency buys throughput, so the limit grows; once requests
start queueing inside the upstream, latency rises and the limit shrinks back.

- **AIMD**: +1 per window of ``limit`` successful samples whose latency is below
  ``tolerance`` x the minimum seen; x``backoff`` on a drop (error, timeout, overload)
  or on latency above that bound.
- **Gradient** (after Netflix's concurrency-limits): ``new = limit x gradient + headroom``
  with ``gradient = clamp(min_rtt / rtt_short, 0.5, 1)`` where ``rtt_short`` is a
  short exponential average; the result is smoothed. A baseline learnt while the
  upstream was already overloaded would hide the knee, so every ``probe_every``
  samples (and every ``relearn_s``) the limiter forgets ``min_rtt`` and halves the
  limit for a moment to measure the no-load latency again.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

__all__ = ["AIMDLimit", "GradientLimit", "Limiter", "StaticLimit", "make_limiter"]


class Limiter:
    """Base: a fixed limit. ``on_sample`` is fed one completed request at a time."""

    def __init__(self, initial: int, min_limit: int = 1, max_limit: int = 1024) -> None:
        self.min_limit = max(1, min_limit)
        self.max_limit = max(self.min_limit, max_limit)
        self._limit = float(min(max(initial, self.min_limit), self.max_limit))

    @property
    def limit(self) -> int:
        return max(self.min_limit, min(self.max_limit, int(self._limit)))

    def on_sample(self, latency: float, inflight: int, dropped: bool) -> None:
        """Record one completed request (``dropped``: error/timeout/overload)."""

    def _set(self, value: float) -> None:
        self._limit = min(float(self.max_limit), max(float(self.min_limit), value))


class StaticLimit(Limiter):
    """A fixed limit (the default)."""


class AIMDLimit(Limiter):
    """Additive increase, multiplicative decrease on drops or high latency."""

    def __init__(
        self,
        initial: int,
        min_limit: int = 1,
        max_limit: int = 1024,
        *,
        backoff: float = 0.9,
        tolerance: float = 2.0,
    ) -> None:
        super().__init__(initial, min_limit, max_limit)
        self.backoff = backoff
        self.tolerance = tolerance
        self._min_rtt = math.inf
        self._credit = 0.0

    def on_sample(self, latency: float, inflight: int, dropped: bool) -> None:
        if not dropped and latency > 0:
            self._min_rtt = min(self._min_rtt, latency)
        too_slow = latency > self.tolerance * self._min_rtt
        if dropped or too_slow:
            self._set(self._limit * self.backoff)
            self._credit = 0.0
        elif inflight * 2 >= self.limit:
            # Only grow when the limit is actually being used; otherwise a quiet
            # period would inflate it without evidence that the upstream can take it.
            self._credit += 1.0 / max(1.0, self._limit)
            if self._credit >= 1.0:
                self._credit = 0.0
                self._set(self._limit + 1)


class GradientLimit(Limiter):
    """Gradient limiter: scales the limit by ``min_rtt / recent_rtt`` plus headroom."""

    def __init__(
        self,
        initial: int,
        min_limit: int = 1,
        max_limit: int = 1024,
        *,
        smoothing: float = 0.2,
        short_alpha: float = 0.1,
        relearn_s: float = 60.0,
        probe_every: int = 10_000,
        clock: Callable[[], float] | None = None,
    ) -> None:
        super().__init__(initial, min_limit, max_limit)
        self.smoothing = smoothing
        self.short_alpha = short_alpha
        self.relearn_s = relearn_s
        self.probe_every = probe_every
        self._samples = 0
        self._clock: Callable[[], float] = clock or time.monotonic
        self._min_rtt = math.inf
        self._short: float | None = None
        self._relearn_at = self._now() + relearn_s

    def _now(self) -> float:
        return self._clock()

    def on_sample(self, latency: float, inflight: int, dropped: bool) -> None:
        now = self._now()
        self._samples += 1
        if now >= self._relearn_at or self._samples >= self.probe_every:
            # Re-learn the baseline at half the load: forget min_rtt and the average.
            self._min_rtt = math.inf
            self._short = None
            self._samples = 0
            self._relearn_at = now + self.relearn_s
            self._set(self._limit / 2)
            return
        if dropped:
            self._set(self._limit * 0.9)
            return
        if latency <= 0:
            return
        self._min_rtt = min(self._min_rtt, latency)
        self._short = (
            latency
            if self._short is None
            else self._short + self.short_alpha * (latency - self._short)
        )
        if inflight * 2 < self.limit:
            return  # app-limited: latency says nothing about the upstream's knee
        gradient = max(0.5, min(1.0, self._min_rtt / self._short))
        headroom = math.sqrt(self._limit)
        target = self._limit * gradient + headroom
        self._set((1 - self.smoothing) * self._limit + self.smoothing * target)


def make_limiter(kind: str, initial: int, min_limit: int = 1, max_limit: int = 1024) -> Limiter:
    """Build the limiter named in the config (``static``, ``aimd`` or ``gradient``)."""
    if kind == "aimd":
        return AIMDLimit(initial, min_limit, max_limit)
    if kind == "gradient":
        return GradientLimit(initial, min_limit, max_limit)
    return StaticLimit(initial, min_limit, max_limit)
