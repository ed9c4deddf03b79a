"""Prometheus metrics of the replica's shared state, on the gateway's registry."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["SharedMetrics"]

_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)


class SharedMetrics:
    """``infersight_gateway_shared_*``: is Redis reachable, how fast, what fell back."""

    def __init__(self, registry: CollectorRegistry) -> None:
        p = "infersight_gateway_shared_"
        r = registry
        self.up = Gauge(
            p + "up",
            "1 while this replica shares limits, spend and breakers through Redis; "
            "0 while it enforces its own (Redis unreachable).",
            registry=r,
        )
        self.errors = Counter(
            p + "errors_total",
            "Redis calls that failed or ran past timeout_ms.",
            ["op"],
            registry=r,
        )
        self.fallbacks = Counter(
            p + "fallbacks_total",
            "Requests decided without Redis: local (own limits) or reject (429).",
            ["decision"],
            registry=r,
        )
        self.latency = Histogram(
            p + "call_seconds",
            "Round trip of one Redis call, as this replica saw it.",
            ["op"],
            buckets=_BUCKETS,
            registry=r,
        )
        self.remote_opens = Counter(
            p + "remote_opens_total",
            "Circuit-breaker opens learnt from another replica.",
            ["upstream"],
            registry=r,
        )
        self.rejoins = Counter(
            p + "rejoins_total",
            "Times Redis became reachable again after an outage.",
            registry=r,
        )
        self.up.set(0)
