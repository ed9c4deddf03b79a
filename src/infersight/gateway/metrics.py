"""Prometheus metrics of one gateway, on its own ``CollectorRegistry``.

Every name starts with ``infersight_gateway_``. Labels never hold an API key, only the
key's configured name (``key="-"`` when auth is off). ``status`` is the HTTP status
the *client* got; ``error`` the error kind (a core/errors.py class name) or ``none``.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

from infersight.core import errors as E
from infersight.core.pricing import Price, PriceTable

__all__ = ["CONTENT_TYPE", "ERROR_KINDS", "REJECTION_REASONS", "GatewayMetrics"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

_WAIT_BUCKETS = (0.0005, 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
#: Requests take longer than they queue: the queue's buckets from 5 ms, then up to 5 min.
_LAT_BUCKETS = (*_WAIT_BUCKETS[2:], 60.0, 120.0, 300.0)
_GROUPS = (
    E.InfersightError,
    E.TransportError,
    E.Timeout,
    E.StatusError,
    E.ProtocolError,
    E.DataError,
)


def _kinds(cls: type[E.InfersightError]) -> list[str]:
    out = [] if cls in _GROUPS else [cls.__name__]
    for sub in cls.__subclasses__():
        if sub.__module__ == E.__name__:
            out += _kinds(sub)
    return out


#: The error kinds a request can end with (docs/design.md section 3): each is exported
#: from 0, so a dashboard shows 0 errors of a kind rather than no data.
ERROR_KINDS = tuple(sorted(set(_kinds(E.InfersightError))))
#: Why the gateway refuses a request itself (``rejections_total``), each from 0.
REJECTION_REASONS = (
    "queue_full",
    "predicted_wait",
    "deadline",
    "rate_limited",
    "auth",
    "bad_request",
    "no_upstream",
    "head_timeout",
    "body_timeout",
    "malformed",
    "connection_limit",
)


class GatewayMetrics:
    """All gateway metrics plus the cost ledger (per model and per key)."""

    def __init__(self, prices: PriceTable | None = None) -> None:
        self.registry = r = CollectorRegistry(auto_describe=True)
        self.prices = prices
        # Every name is infersight_gateway_<name>, on this gateway's own registry.
        counter = partial(Counter, namespace="infersight", subsystem="gateway", registry=r)
        gauge = partial(Gauge, namespace="infersight", subsystem="gateway", registry=r)
        histogram = partial(Histogram, namespace="infersight", subsystem="gateway", registry=r)
        self.requests = counter(
            "requests_total",
            "Requests answered, by model, upstream, status and error kind.",
            ["endpoint", "model", "upstream", "status", "error"],
        )
        self.latency = histogram(
            "request_duration_seconds",
            "Arrival to last byte, per request.",
            ["model", "upstream"],
            buckets=_LAT_BUCKETS,
        )
        self.ttft = histogram(
            "ttft_seconds",
            "Arrival to the first content byte sent (streams).",
            ["model", "upstream"],
            buckets=_LAT_BUCKETS,
        )
        self.queue_delay = histogram(
            "queue_delay_seconds",
            "Time spent waiting for an upstream slot.",
            ["upstream"],
            buckets=_WAIT_BUCKETS,
        )
        self.queue_depth = gauge(
            "queue_depth", "Requests waiting for an upstream slot.", ["upstream"]
        )
        self.in_flight = gauge("in_flight", "Requests being served by an upstream.", ["upstream"])
        self.limit = gauge(
            "concurrency_limit",
            "Current concurrency limit (adaptive or static).",
            ["upstream"],
        )
        self.rejections = counter(
            "rejections_total",
            "Requests refused by the gateway (queue_full, predicted_wait, deadline, "
            "rate_limited, auth, bad_request, no_upstream; slow or malformed clients: "
            "head_timeout, body_timeout, malformed, connection_limit).",
            ["reason"],
        )
        for reason in REJECTION_REASONS:
            self.rejections.labels(reason)
        self.errors = counter(
            "errors_total",
            "Requests answered with an error, by error kind (every kind exported from 0).",
            ["error"],
        )
        for kind in ERROR_KINDS:
            self.errors.labels(kind)
        self.retries = counter("retries_total", "Extra attempts on one upstream.", ["upstream"])
        self.failovers = counter(
            "failovers_total",
            "Requests moved to the next upstream (before content was sent) after this "
            "upstream failed with this error.",
            ["upstream", "error"],
        )
        self.upstream_errors = counter(
            "upstream_errors_total",
            "Failed upstream calls by error kind (OutOfMemory: the engine ran out of "
            "memory), whether or not the request then failed over.",
            ["upstream", "error"],
        )
        self.failover_pairs = counter(
            "failover_pairs_total",
            "Requests moved from one upstream to another (before content was sent), by "
            "the upstream that failed and the one that took the request over.",
            ["from_upstream", "to_upstream"],
        )
        self.weight = gauge(
            "upstream_weight",
            "Routing weight of an upstream from its recent error share (1: healthy; "
            "lower: a smaller share of new requests).",
            ["upstream"],
        )
        self.fallbacks = counter(
            "fallbacks_total",
            "Requests served by a fallback model.",
            ["model", "fallback"],
        )
        self.circuit = gauge(
            "circuit_state",
            "Circuit breaker: 0 closed, 1 half-open, 2 open.",
            ["upstream"],
        )
        self.circuit_changes = counter(
            "circuit_transitions_total",
            "Circuit breaker state changes.",
            ["upstream", "state"],
        )
        self.tokens = counter(
            "tokens_total", "Tokens from upstream usage.", ["model", "key", "kind"]
        )
        self.cost = counter(
            "cost_usd_total",
            "Dollars from usage and the price table.",
            ["model", "key"],
        )
        self.model_priced = gauge(
            "model_priced",
            "1 for a served model the price table prices, 0 for one it does not (its cost "
            "is not counted).",
            ["model"],
        )
        self.truncations = counter(
            "truncated_streams_total",
            "Streams that broke after content was sent (client got an SSE error event).",
            ["model", "upstream"],
        )
        self.batches = histogram(
            "batch_size",
            "Caller requests merged into one upstream call.",
            ["endpoint"],
            buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256),
        )
        self.upstream_calls = counter(
            "upstream_calls_total",
            "Calls made to upstreams (after batching).",
            ["upstream", "endpoint"],
        )
        self.key_spend = gauge(
            "key_spend_usd",
            "Dollars a gateway key has spent (the fleet's total when replicas share state).",
            ["key"],
        )
        self.key_budget = gauge("key_budget_usd", "A gateway key's budget (max_cost_usd).", ["key"])
        #: Cost ledger for /stats: {(model, key): [prompt, completion, dollars]}.
        self.ledger: dict[tuple[str, str], list[float]] = {}
        # Hot path caches: .labels() takes a lock and builds a tuple; pattern price
        # lookups run fnmatch over the whole table. Both are done once per label set.
        self._children: dict[tuple[Any, ...], Any] = {}
        self._price_cache: dict[str, Price | None] = {}

    def served(self, models: list[str], keys: list[str]) -> None:
        """Export the served models from 0: their cost and tokens per key (so a healthy
        gateway shows 0 rather than no data) and whether each has a price."""
        for model in models:
            price = self._price(model)
            self.model_priced.labels(model).set(1 if price is not None else 0)
            for key in keys:
                self.child(self.tokens, model, key, "prompt")
                self.child(self.tokens, model, key, "completion")
                if price is not None:
                    self.child(self.cost, model, key)

    def child(self, metric: Any, *labels: str) -> Any:
        """``metric.labels(*labels)``, cached."""
        k = (id(metric), *labels)
        c = self._children.get(k)
        if c is None:
            c = self._children[k] = metric.labels(*labels)
        return c

    def _price(self, model: str) -> Price | None:
        try:
            return self._price_cache[model]
        except KeyError:
            p = self._price_cache[model] = self.prices.price(model) if self.prices else None
            return p

    def priced(self, model: str) -> bool:
        """True when the price table has a price for ``model``."""
        return self._price(model) is not None

    def price_of(self, model: str, prompt: int, completion: int) -> float | None:
        """The dollars of one request's tokens (None: the model has no price); counts
        nothing (:meth:`account` does, once the request ends)."""
        price = self._price(model)
        return price.cost(prompt, completion) if price is not None else None

    def account(self, model: str, key: str | None, prompt: int, completion: int) -> float | None:
        """Count tokens and cost of one request; return its dollars (None: no price)."""
        kname = key or "-"
        if prompt:
            self.child(self.tokens, model, kname, "prompt").inc(prompt)
        if completion:
            self.child(self.tokens, model, kname, "completion").inc(completion)
        dollars = self.price_of(model, prompt, completion)
        if dollars:
            self.child(self.cost, model, kname).inc(dollars)
        row = self.ledger.setdefault((model, kname), [0.0, 0.0, 0.0])
        row[0] += prompt
        row[1] += completion
        row[2] += dollars or 0.0
        return dollars

    def cost_summary(self) -> dict[str, dict[str, dict[str, float]]]:
        """{"by_model": {m: {...}}, "by_key": {k: {...}}} for the /stats endpoint."""
        out: dict[str, dict[str, dict[str, float]]] = {"by_model": {}, "by_key": {}}
        for (model, key), (pt, ct, usd) in self.ledger.items():
            for group, name in (("by_model", model), ("by_key", key)):
                row = out[group].setdefault(
                    name, {"prompt_tokens": 0.0, "completion_tokens": 0.0, "cost_usd": 0.0}
                )
                row["prompt_tokens"] += pt
                row["completion_tokens"] += ct
                row["cost_usd"] += usd
        return out

    def render(self) -> bytes:
        return generate_latest(self.registry)
