"""One measurement window of the adaptive law: the requests sent under one limit.

A window opens when the limit changes. Only requests sent after that (``epoch``)
count, so a result says something about the current limit alone. Throughput comes
from Little's law: requests in flight / mean latency of the window's requests, which
needs one request latency per step instead of two.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

__all__ = ["LimitWindow"]


def _p90(values: list[float]) -> float | None:
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, math.ceil(0.9 * len(s)) - 1)]


@dataclass(slots=True)
class LimitWindow:
    """Latencies and the in-flight integral since ``epoch``."""

    #: Requests sent from here on ran under the current limit.
    epoch: float
    last: float
    new: int = 0
    #: Integral of the in-flight count over the window.
    busy: float = 0.0
    lat: list[float] = field(default_factory=list)
    ttft: list[float] = field(default_factory=list)
    tpot: list[float] = field(default_factory=list)

    @classmethod
    def opened(cls, now: float) -> LimitWindow:
        return cls(now, now)

    def tick(self, now: float, inflight: int) -> None:
        self.busy += inflight * max(0.0, now - self.last)
        self.last = now

    def add(self, latency: float, ttft: float | None, tpot: float | None) -> None:
        self.new += 1
        self.lat.append(latency)
        if ttft is not None:
            self.ttft.append(ttft)
        if tpot is not None:
            self.tpot.append(tpot)

    def result(
        self, now: float, limit: int, min_samples: int, min_interval: float
    ) -> tuple[float, float] | None:
        """(throughput, mean in flight) once ``max(min_samples, limit)`` requests came
        back over at least ``min_interval`` seconds; None before."""
        dur = now - self.epoch
        if self.new < max(min_samples, limit) or dur < min_interval:
            return None
        busy = self.busy / dur
        mean_lat = sum(self.lat) / len(self.lat)
        return min(busy, limit) / max(mean_lat, 1e-9), busy

    def breach(
        self, max_latency: float | None, ttft_slo: float | None, tpot_slo: float | None
    ) -> str | None:
        """Why the window's p90 latency, TTFT or TPOT breaks its limit, or None."""
        lat, ttft, tpot = _p90(self.lat), _p90(self.ttft), _p90(self.tpot)
        if max_latency is not None and lat is not None and lat > max_latency:
            return f"p90 latency {lat:.2f} s > max {max_latency:g} s"
        if ttft_slo is not None and ttft is not None and ttft > ttft_slo:
            return f"p90 TTFT {ttft:.3f} s > SLO {ttft_slo:g} s"
        if tpot_slo is not None and tpot is not None and tpot > tpot_slo:
            return f"p90 TPOT {tpot * 1000:.1f} ms > SLO {tpot_slo * 1000:g} ms"
        return None
