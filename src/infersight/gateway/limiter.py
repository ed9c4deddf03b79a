"""Concurrency limits per upstream: static, or adaptive (the law batch uses too).

The adaptive limit is :class:`infersight.control.AdaptiveConcurrency`, the one law
shared with ``infersight batch``: it raises the limit while throughput rises, probes
now and then, backs off on congestion (a 429, 503, timeout or out-of-memory answer)
at most once per round trip and climbs back to just under the level that failed.
The config's ``aimd`` and ``gradient`` both select it: they name the two laws the
gateway had before, kept so that existing configs and ``--adaptive`` still work.
``benchmarks/adaptive_controllers.py`` measured why one law serves both features
(docs/design.md, section 4).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from infersight.control import AdaptiveConcurrency

__all__ = ["AdaptiveLimit", "Limiter", "StaticLimit", "make_limiter"]


class Limiter:
    """Base: a fixed limit. ``on_sample`` is fed one completed request at a time."""

    def __init__(self, initial: int, min_limit: int = 1, max_limit: int = 1024) -> None:
        self.min_limit = max(1, min_limit)
        self.max_limit = max(self.min_limit, max_limit)
        self._limit = min(max(initial, self.min_limit), self.max_limit)

    @property
    def limit(self) -> int:
        return self._limit

    def on_sample(self, latency: float, inflight: int, dropped: bool) -> None:
        """Record one completed request (``dropped``: error/timeout/overload).

        ``inflight`` counts the requests in flight, this one included."""


class StaticLimit(Limiter):
    """A fixed limit (the default)."""


class AdaptiveLimit(Limiter):
    """The shared adaptive law, fed by the gateway's admission control."""

    def __init__(
        self,
        initial: int,
        min_limit: int = 1,
        max_limit: int = 1024,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(initial, min_limit, max_limit)
        self._clock = clock
        self.law = AdaptiveConcurrency(
            now=clock(), initial=self._limit, minimum=self.min_limit, maximum=self.max_limit
        )

    @property
    def limit(self) -> int:
        return self.law.limit

    def on_sample(self, latency: float, inflight: int, dropped: bool) -> None:
        now = self._clock()
        # Admission reports completions only, not sends: the law's in-flight count (and
        # so its window's in-flight integral) is stepped here. That is close to exact
        # while the limit binds, the only time the law learns anything.
        self.law.inflight = inflight
        started = now - latency
        if dropped:
            self.law.on_error(now, started=started, kind="Overloaded", congestion=True)
        else:
            self.law.on_success(now, started=started, latency=latency)


def make_limiter(kind: str, initial: int, min_limit: int = 1, max_limit: int = 1024) -> Limiter:
    """Build the limiter named in the config: ``static``, else (``aimd``, ``gradient``)
    the shared adaptive law."""
    if kind in ("aimd", "gradient"):
        return AdaptiveLimit(initial, min_limit, max_limit)
    return StaticLimit(initial, min_limit, max_limit)
