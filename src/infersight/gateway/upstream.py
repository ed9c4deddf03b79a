"""One upstream as the gateway sees it: its client, admission control, breaker and
recent health (the weight the router gives it)."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from infersight.client import Client, RetryPolicy, Timeouts, resolve_api_key
from infersight.core.endpoint import shown_url
from infersight.core.errors import InfersightError
from infersight.gateway.admission import AdmissionController
from infersight.gateway.auth import TokenBucket
from infersight.gateway.breaker import BreakerState, CircuitBreaker
from infersight.gateway.call import Call
from infersight.gateway.config import UpstreamConfig
from infersight.gateway.limiter import make_limiter
from infersight.gateway.metrics import GatewayMetrics
from infersight.gateway.upstream_health import HealthWindow

__all__ = ["Upstream"]

log = logging.getLogger("infersight.gateway")


class Upstream:
    """An OpenAI-compatible server with its limit, queue, breaker and models."""

    def __init__(self, cfg: UpstreamConfig, metrics: GatewayMetrics) -> None:
        self.cfg = cfg
        self.name = cfg.name
        self.metrics = metrics
        self.models: set[str] = set(cfg.models)
        #: True while the model list is unknown: the upstream is tried for any model.
        self.wildcard = not cfg.models
        limiter = make_limiter(
            cfg.limiter, cfg.concurrency, cfg.min_concurrency, cfg.max_concurrency
        )
        rejections = metrics.rejections
        self.admission = AdmissionController(
            limiter, cfg.queue, on_reject=lambda reason: rejections.labels(reason).inc()
        )
        circuit = metrics.circuit.labels(cfg.name)
        changes = metrics.circuit_changes
        name = cfg.name

        def on_change(state: BreakerState) -> None:
            circuit.set(int(state))
            changes.labels(name, state.name.lower()).inc()
            log.warning("upstream %s: circuit %s", name, state.name.lower().replace("_", "-"))

        self.breaker = CircuitBreaker(
            cfg.breaker_failures, cfg.breaker_cooldown_s, cfg.breaker_probes, on_change=on_change
        )
        circuit.set(0)
        metrics.limit.labels(cfg.name).set(self.admission.limit)
        # Bound metric children once: .labels() on the hot path costs a dict lookup + lock.
        self.m_inflight = metrics.in_flight.labels(cfg.name)
        self.m_queue = metrics.queue_depth.labels(cfg.name)
        self.m_limit = metrics.limit.labels(cfg.name)
        self.m_queue_delay = metrics.queue_delay.labels(cfg.name)
        self.m_retries = metrics.retries.labels(cfg.name)
        self.m_weight = metrics.weight.labels(cfg.name)
        self.m_weight.set(1.0)
        #: Recent outcomes: the routing weight (docs/design.md section 4).
        self.health = HealthWindow()
        self.client: Client | None = None
        self.stream_client: Client | None = None
        # Requests / tokens per minute (LiteLLM rpm / tpm): once spent, the upstream is
        # skipped for the next candidate until the budget refills.
        rpm, tpm = cfg.requests_per_minute, cfg.tokens_per_minute
        self.requests_budget = TokenBucket(rpm) if rpm else None
        self.tokens_budget = TokenBucket(tpm) if tpm else None

    @staticmethod
    def attempt_timeouts(client: Client, call: Call) -> Timeouts:
        """``client``'s limits for one attempt of ``call``. When another upstream may
        take the request over, the first-byte and idle limits are at most half the time
        left to its deadline: an upstream that goes silent (at its start or in the middle
        of its body) is left while the next one can still answer, instead of holding the
        request until the deadline."""
        t = client.timeouts
        half = (call.deadline - time.monotonic()) / 2
        if not call.next_candidate or half <= 0:
            return t
        ft = t.first_token if t.first_token is not None and t.first_token <= half else half
        idle = t.idle if t.idle is not None and t.idle <= half else half
        return Timeouts(connect=t.connect, first_token=ft, idle=idle, total=t.total)

    def wire_model(self, model: str) -> str:
        """The name this upstream knows ``model`` by (``model_map``, else the same)."""
        return self.cfg.model_map.get(model, model)

    def budget_wait(self) -> float:
        """Seconds until the rpm/tpm budgets take one more request (0: now)."""
        if self.requests_budget is None and self.tokens_budget is None:
            return 0.0  # the common case, on every request
        budgets = (self.requests_budget, self.tokens_budget)
        return max((b.wait_for(1.0) for b in budgets if b is not None), default=0.0)

    def spend(self, *, requests: int = 0, tokens: int = 0) -> None:
        """Charge the rpm/tpm budgets (tokens once the usage is known)."""
        if self.requests_budget is not None and requests:
            self.requests_budget.charge(requests)
        if self.tokens_budget is not None and tokens:
            self.tokens_budget.charge(tokens)

    # -- Routable -------------------------------------------------------------------
    def serves(self, model: str) -> bool:
        return self.wildcard or model in self.models

    def load(self) -> float:
        a = self.admission
        return (a.inflight + a.queued) / max(1, a.limit)

    def available(self) -> bool:
        return self.breaker.available()

    def weight(self) -> float:
        return self.health.weight()

    def admitting(self) -> bool:
        """Whether a request sent here now would be taken (at once or into the queue)."""
        a = self.admission
        return self.breaker.available() and a.queued < a.queue_size and self.budget_wait() == 0.0

    def seconds_until_probe(self) -> float:
        return self.breaker.seconds_until_probe()

    # -- lifecycle ----------------------------------------------------------------------
    def api_key(self) -> str | None:
        if self.cfg.api_key is not None:
            return self.cfg.api_key.get_secret_value()
        if not (self.cfg.api_key_env or self.cfg.api_key_file):
            return None
        return resolve_api_key(env=self.cfg.api_key_env, file=self.cfg.api_key_file, required=True)

    async def start(self) -> None:
        c = self.cfg
        key = self.api_key()

        def make(first_token: float | None, idle: float | None) -> Client:
            return Client(
                c.url,
                api_key=key,
                timeouts=Timeouts(
                    connect=c.connect_timeout_s,
                    first_token=first_token,
                    idle=idle,
                    total=None,  # the gateway passes each request's own deadline
                ),
                retry=RetryPolicy(max_attempts=c.max_attempts, budget=budget),
            )

        # One retry budget per upstream, shared by both clients.
        budget = RetryPolicy().budget
        # A non-streamed answer's first byte is its response head: an upstream that
        # stays silent (or stalls in its body) is left for the next one, as a stream is.
        first_byte = c.first_byte_timeout_s or c.ttft_timeout_s
        if c.first_byte_timeout_s is None and c.ttft_timeout_s is not None:
            log.warning(
                "upstream %s: non-streamed answers must start within ttft_timeout_s=%g s; "
                "engines send them once generated: set first_byte_timeout_s to the longest "
                "non-streamed generation you accept",
                self.name,
                c.ttft_timeout_s,
            )
        self.client = await make(first_byte, c.idle_timeout_s).__aenter__()
        self.stream_client = await make(c.ttft_timeout_s, c.idle_timeout_s).__aenter__()
        if self.wildcard:
            await self.discover()

    async def discover(self, timeout: float = 5.0) -> bool:
        """Learn the model list from ``/v1/models``; keep the wildcard on failure."""
        if self.client is None:
            return False
        try:
            async with asyncio.timeout(timeout):
                models = await self.client.models()
        except (InfersightError, TimeoutError) as e:
            log.warning(
                "upstream %s: cannot list models (%s); routing any model to it",
                self.name,
                str(e).replace(self.cfg.url, shown_url(self.cfg.url)),
            )
            return False
        if models:
            self.models = set(models)
            self.wildcard = False
        return True

    async def close(self) -> None:
        for c in (self.client, self.stream_client):
            if c is not None:
                await c.close()
        self.client = self.stream_client = None

    # -- bookkeeping ----------------------------------------------------------------------
    def gauges(self) -> None:
        """Refresh the queue/in-flight/limit gauges (after any admission change)."""
        a = self.admission
        self.m_inflight.set(a.inflight)
        self.m_queue.set(a.queued)
        self.m_limit.set(a.limit)
        self.m_weight.set(self.health.weight())

    def state(self) -> dict[str, Any]:
        a = self.admission
        return {
            "name": self.name,
            "url": shown_url(self.cfg.url),
            "models": sorted(self.models) if not self.wildcard else ["*"],
            "circuit": self.breaker.state.name.lower(),
            "in_flight": a.inflight,
            "queued": a.queued,
            "limit": a.limit,
            "queue_size": a.queue_size,
            "drain_rate": a.drain_rate(),
            "error_share": round(self.health.error_share(), 4),
            "weight": round(self.health.weight(), 4),
        }
