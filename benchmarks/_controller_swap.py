"""The two adaptive laws behind each feature's interface, for `adaptive_controllers.py`.

- ``gradient``: the gateway's own law until the two were merged (``GradientLimit`` of
  ``gateway/limiter.py`` at 1c8854d, kept here unchanged so the comparison can be
  rerun): ``new = limit x clamp(min_rtt / rtt_short, 0.5, 1) + sqrt(limit)``,
  smoothed; x0.9 on each drop; the baseline is re-learnt at half the limit every 60 s.
- ``batch``: :class:`infersight.control.AdaptiveConcurrency`, the batch's law, now
  shared; the gateway runs it as ``gateway.limiter.AdaptiveLimit``.

:class:`GradientForBatch` runs the gradient law as a batch ``ConcurrencyController``. It
keeps the batch runner's bookkeeping (the in-flight count and the server's Retry-After
pause, which ``--concurrency N`` honours too), so only the law differs.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from infersight.control.controller import ConcurrencyController
from infersight.gateway.limiter import Limiter


class GradientLimit(Limiter):
    """The gateway's former gradient law (after Netflix's concurrency-limits)."""

    def __init__(
        self,
        initial: int,
        min_limit: int = 1,
        max_limit: int = 1024,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(initial, min_limit, max_limit)
        self.smoothing, self.short_alpha, self.relearn_s, self.probe_every = 0.2, 0.1, 60.0, 10_000
        self._value = float(self._limit)
        self._samples = 0
        self._clock = clock
        self._min_rtt = math.inf
        self._short: float | None = None
        self._relearn_at = clock() + self.relearn_s

    @property
    def limit(self) -> int:
        return max(self.min_limit, min(self.max_limit, int(self._value)))

    def _set(self, value: float) -> None:
        self._value = min(float(self.max_limit), max(float(self.min_limit), value))

    def on_sample(self, latency: float, inflight: int, dropped: bool) -> None:
        now = self._clock()
        self._samples += 1
        if now >= self._relearn_at or self._samples >= self.probe_every:
            self._min_rtt, self._short, self._samples = math.inf, None, 0
            self._relearn_at = now + self.relearn_s
            self._set(self._value / 2)
            return
        if dropped:
            self._set(self._value * 0.9)
            return
        if latency <= 0:
            return
        self._min_rtt = min(self._min_rtt, latency)
        short = self._short
        self._short = latency if short is None else short + self.short_alpha * (latency - short)
        if inflight * 2 < self.limit:
            return
        gradient = max(0.5, min(1.0, self._min_rtt / self._short))
        target = self._value * gradient + math.sqrt(self._value)
        self._set((1 - self.smoothing) * self._value + self.smoothing * target)


class GradientForBatch(ConcurrencyController):
    """The gradient law, fed by the batch runner."""

    def __init__(self, *, now: float, initial: int, minimum: int, maximum: int) -> None:
        super().__init__(limit=initial, t0=now)
        self.law = GradientLimit(initial, minimum, maximum)
        self.limit = self.law.limit
        self.history.append((now, self.limit))

    def _follow(self, now: float) -> None:
        if self.law.limit != self.limit:
            self._log(now, self.law.limit, "gradient")

    def on_success(
        self,
        now: float,
        *,
        started: float,
        latency: float,
        ttft: float | None = None,
        tpot: float | None = None,
    ) -> None:
        self.law.on_sample(latency, self.inflight, dropped=False)
        self.inflight = max(0, self.inflight - 1)
        self._follow(now)

    def on_error(
        self,
        now: float,
        *,
        started: float,
        kind: str,
        congestion: bool,
        retry_after: float | None = None,
    ) -> None:
        if congestion:
            self._pause(now, retry_after)
            self.law.on_sample(now - started, self.inflight, dropped=True)
        self.inflight = max(0, self.inflight - 1)
        self._follow(now)
