"""The gateway's non-proxy endpoints: /v1/models, /metrics, /health, /stats and
``PUT /upstreams/{name}/limit``.

With keys configured, all but /health need one (docs/design.md section 4): /stats shows
the upstreams and the spend per key, /v1/models what is served, and the limit endpoint
sets an upstream's concurrency limit while the gateway runs (``tune`` tries limits
this way, without a restart). ``metrics_public``
opens /metrics alone, for a Prometheus that scrapes without credentials. No URL shown
here carries credentials.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import orjson
from aiohttp import web

from infersight.gateway.accounting import Accounting
from infersight.gateway.call import own_headers, request_id
from infersight.gateway.error_answers import error_response
from infersight.gateway.errors import InputError
from infersight.gateway.limiter import StaticLimit
from infersight.gateway.metrics import CONTENT_TYPE

if TYPE_CHECKING:
    from infersight.gateway.auth import KeyStore
    from infersight.gateway.engine_routes import EngineRoutes
    from infersight.gateway.metrics import GatewayMetrics
    from infersight.gateway.request_merge import BatchMerger
    from infersight.gateway.router import Router
    from infersight.gateway.shared import SharedState
    from infersight.gateway.upstream import Upstream

__all__ = ["MAX_LIMIT", "AdminEndpoints"]

#: The highest concurrency limit ``PUT /upstreams/{name}/limit`` takes.
MAX_LIMIT = 100_000


def _dumps(obj: Any) -> str:
    return orjson.dumps(obj).decode()


class AdminEndpoints(Accounting):
    """Mixed into :class:`~infersight.gateway.server.Gateway`."""

    upstreams: list[Upstream]
    router: Router
    metrics: GatewayMetrics
    merger: BatchMerger
    keys: KeyStore
    shared: SharedState | None
    started: float
    metrics_public: bool
    engine: EngineRoutes | None

    async def models(self, request: web.Request) -> web.Response:
        """The union of every upstream's models (discovered ones refreshed on demand)."""
        if (denied := self._denied(request)) is not None:
            return denied
        owners: dict[str, list[str]] = {}
        for u in self.upstreams:
            if u.wildcard:
                await u.discover(timeout=2.0)
            for m in sorted(u.models):
                owners.setdefault(m, []).append(u.name)
        data = [
            {
                "id": m,
                "object": "model",
                "created": int(self.started),
                "owned_by": "infersight",
                "upstreams": ups,
            }
            for m, ups in sorted(owners.items())
        ]
        return web.json_response(
            {"object": "list", "data": data}, dumps=_dumps, headers=own_headers()
        )

    async def prom(self, request: web.Request) -> web.Response:
        if not self.metrics_public and (denied := self._denied(request)) is not None:
            return denied
        for u in self.upstreams:
            u.gauges()
            u.metrics.circuit.labels(u.name).set(int(u.breaker.state))
        await self.keys.refresh_spend()
        for name, (spent, budget) in self.keys.spend().items():
            self.metrics.key_spend.labels(name).set(spent)
            if budget is not None:
                self.metrics.key_budget.labels(name).set(budget)
        body = self.metrics.render()
        if self.engine is not None:  # serve: the engine's llamacpp:* metrics come first
            body = await self.engine.metrics_text() + body
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE, **own_headers()})

    def health_reasons(self) -> tuple[list[str], list[str]]:
        """(reasons the gateway cannot serve some model, warnings)."""
        reasons: list[str] = []
        warnings: list[str] = []
        if not self.upstreams:
            reasons.append("no upstream configured")
        if self.shared is not None:
            warnings.extend(self.shared.warnings())
        for u in self.upstreams:
            st = u.breaker.state.name.lower().replace("_", "-")
            if st != "closed":
                warnings.append(f"upstream {u.name}: circuit {st}")
            a = u.admission
            if a.queue_size and a.queued >= a.queue_size:
                warnings.append(f"upstream {u.name}: queue full ({a.queued})")
        models = {m for u in self.upstreams for m in u.models}
        for m in sorted(models):
            if not self.router.replicas(m):
                reasons.append(f"model {m}: no upstream with a closed circuit")
            elif all(
                u.admission.queue_size and u.admission.queued >= u.admission.queue_size
                for u in self.upstreams
                if u.serves(m)
            ):
                reasons.append(f"model {m}: every upstream queue is full")
        return reasons, warnings

    async def health(self, request: web.Request) -> web.Response:
        reasons, warnings = self.health_reasons()
        doc: dict[str, Any] = {
            "status": "degraded" if reasons else "ok",
            "reasons": reasons,
            "warnings": warnings,
        }
        if self.shared is not None:
            doc["shared"] = self.shared.health()
        return web.json_response(
            doc, status=503 if reasons else 200, dumps=_dumps, headers=own_headers()
        )

    async def stats(self, request: web.Request) -> web.Response:
        if (denied := self._denied(request)) is not None:
            return denied
        await self.keys.refresh_spend()
        doc = {
            "uptime_s": time.time() - self.started,
            "upstreams": [u.state() for u in self.upstreams],
            "cost": self.metrics.cost_summary(),
            "keys": {
                name: {"spent_usd": spent, "budget_usd": budget}
                for name, (spent, budget) in self.keys.spend().items()
            },
            **({"shared": self.shared.stats()} if self.shared is not None else {}),
            "batching": {
                "batches": self.merger.batcher.flushed_batches,
                "items": self.merger.batcher.flushed_items,
            },
        }
        return web.json_response(doc, dumps=_dumps, headers=own_headers())

    async def set_limit(self, request: web.Request) -> web.Response:
        """``PUT /upstreams/{name}/limit`` with ``{"concurrency": N}``: from now on the
        upstream admits N requests at once (a static limit, whatever limiter it had)."""
        if (denied := self._denied(request)) is not None:
            return denied
        name = request.match_info["name"]
        upstream = next((u for u in self.upstreams if u.name == name), None)
        if upstream is None:
            return error_response(
                InputError(f"no upstream named {name!r}", code="not_found", status=404),
                request_id(),
            )
        try:
            body = orjson.loads(await request.read())
        except orjson.JSONDecodeError:
            body = None
        n = body.get("concurrency") if isinstance(body, dict) else None
        if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= MAX_LIMIT:
            return error_response(
                InputError(
                    f'give {{"concurrency": N}} with N from 1 to {MAX_LIMIT:,}', param="concurrency"
                ),
                request_id(),
            )
        upstream.admission.set_limit(StaticLimit(n, min_limit=1, max_limit=MAX_LIMIT))
        return web.json_response(upstream.state(), dumps=_dumps, headers=own_headers())
