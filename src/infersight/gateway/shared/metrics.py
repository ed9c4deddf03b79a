"""Prometheus metrics of the replica's shared state, on the gateway's registry."""

from __future__ import annotations

from functools import partial

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["SharedMetrics"]

_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)


class SharedMetrics:
    """``infersight_gateway_shared_*``: is Redis reachable, how fast, what fell back."""

    def __init__(self, registry: CollectorRegistry) -> None:
        r, ns, sub = registry, "infersight", "gateway_shared"
        counter = partial(Counter, namespace=ns, subsystem=sub, registry=r)
        gauge = partial(Gauge, namespace=ns, subsystem=sub, registry=r)
        histogram = partial(Histogram, namespace=ns, subsystem=sub, registry=r)
        self.up = gauge(
            "up",
            "1 while this replica shares limits, spend and breakers through Redis; "
            "0 while it enforces its own (Redis unreachable).",
        )
        self.errors = counter(
            "errors_total",
            "Redis calls that failed or ran past timeout_ms.",
            ["op"],
        )
        self.fallbacks = counter(
            "fallbacks_total",
            "Requests decided without Redis: local (own limits) or reject (429).",
            ["decision"],
        )
        self.latency = histogram(
            "call_seconds",
            "Round trip of one Redis call, as this replica saw it.",
            ["op"],
            buckets=_BUCKETS,
        )
        self.remote_opens = counter(
            "remote_opens_total",
            "Circuit-breaker opens learnt from another replica.",
            ["upstream"],
        )
        self.rejoins = counter(
            "rejoins_total",
            "Times Redis became reachable again after an outage.",
        )
        self.up.set(0)
