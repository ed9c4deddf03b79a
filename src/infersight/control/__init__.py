"""Adaptive concurrency control, shared by the gateway and batch (below both features).

One law, :class:`AdaptiveConcurrency`, decides how many requests may be in flight
to one server: it seeks the level of most throughput, backs off on congestion (429,
503, timeouts, out of memory) and on latency limits. It is pure: no I/O, and every
call carries the time (``now``), so tests drive it with a simulated clock.
``batch`` feeds it each attempt; the gateway feeds it each finished upstream attempt
through ``gateway.limiter.AdaptiveLimit``. Why one law serves both:
``benchmarks/adaptive_controllers.py`` and docs/design.md, section 4.
"""

from infersight.control.adaptive import AdaptiveConcurrency
from infersight.control.controller import ConcurrencyController, Decision, FixedConcurrency
from infersight.control.window import LimitWindow

__all__ = [
    "AdaptiveConcurrency",
    "ConcurrencyController",
    "Decision",
    "FixedConcurrency",
    "LimitWindow",
]
