"""infersight.gateway: an OpenAI-compatible gateway that keeps upstreams busy and
every request safe (docs/design.md section 4).

Admission control per upstream (static or adaptive concurrency limit, bounded
priority queue, 503 + Retry-After from the measured drain rate), failover before the
first byte, circuit breakers, fallback chains, least-outstanding routing with an
optional cost rule, dynamic batching, per-key auth, rate limits and budgets, cost
accounting, Prometheus metrics, /health and one JSON log line per request. Replicas
share limits, spend and breaker opens through Redis (``infersight.gateway.shared``).

    from infersight.gateway import Gateway, load_config
    cfg = load_config("gateway.toml", port=0)
    async with Gateway(cfg).running() as gw:
        print(gw.url)
"""

from infersight.gateway.admission import AdmissionController
from infersight.gateway.breaker import BreakerState, CircuitBreaker
from infersight.gateway.config import (
    BatchingConfig,
    CostRule,
    GatewayConfig,
    KeyConfig,
    SharedConfig,
    UpstreamConfig,
    hash_key,
    load_config,
    parse_upstream_flag,
)
from infersight.gateway.dynamic_batching import DynamicBatcher
from infersight.gateway.limiter import AdaptiveLimit, StaticLimit, make_limiter
from infersight.gateway.metrics import GatewayMetrics
from infersight.gateway.router import Router
from infersight.gateway.runner import serve
from infersight.gateway.server import Gateway

__all__ = [
    "AdaptiveLimit",
    "AdmissionController",
    "BatchingConfig",
    "BreakerState",
    "CircuitBreaker",
    "CostRule",
    "DynamicBatcher",
    "Gateway",
    "GatewayConfig",
    "GatewayMetrics",
    "KeyConfig",
    "Router",
    "SharedConfig",
    "StaticLimit",
    "UpstreamConfig",
    "hash_key",
    "load_config",
    "make_limiter",
    "parse_upstream_flag",
    "serve",
]
