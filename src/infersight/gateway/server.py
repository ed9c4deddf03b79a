"""The gateway's aiohttp application: OpenAI endpoints, /metrics, /health, /stats.

Use it from code::

    async with Gateway(config).running() as gw:
        print(gw.url)          # http://127.0.0.1:PORT (port 0 picks a free one)

or from the shell with ``infersight gateway``.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from aiohttp import hdrs, web

from infersight.core.access_log_format import SESSION_HEADER
from infersight.core.errors import Cancelled, DeadlineExceeded, InfersightError
from infersight.core.listen import check_can_listen
from infersight.core.pricing import PriceTable
from infersight.gateway.admin import AdminEndpoints
from infersight.gateway.auth import KeyStore
from infersight.gateway.call import own_headers, request_id
from infersight.gateway.config import GatewayConfig
from infersight.gateway.engine_routes import EngineRoutes
from infersight.gateway.errors import ClientFault, InputError
from infersight.gateway.listener import ClientLimits, Listener
from infersight.gateway.metrics import GatewayMetrics
from infersight.gateway.proxy import Call, Proxy
from infersight.gateway.request_body import (
    ENDPOINTS,
    estimate_tokens,
    model_not_found,
    parse_body,
    validate,
)
from infersight.gateway.request_guard import Handler, RequestGuard, read_body
from infersight.gateway.request_merge import BatchMerger
from infersight.gateway.router import Router
from infersight.gateway.shared import SharedState
from infersight.gateway.upstream import Upstream

__all__ = ["Gateway"]

log = logging.getLogger("infersight.gateway")

_RID_OK = re.compile(r"^[A-Za-z0-9._:\-]{1,128}$")


class Gateway(AdminEndpoints):
    """An OpenAI-compatible gateway over the configured upstreams."""

    def __init__(self, config: GatewayConfig, prices: PriceTable | None = None) -> None:
        self.config = config
        self.metrics = GatewayMetrics(prices or PriceTable.load(config.prices_file))
        self.upstreams = [Upstream(u, self.metrics) for u in config.upstreams]
        self.router = Router(self.upstreams, config.fallbacks, config.cost_rules)
        self.proxy = Proxy(self.router, self.metrics)
        self.merger = BatchMerger(config.batch, self.proxy, self.metrics)
        sc = config.shared
        self.shared = (
            None
            if sc.redis_url is None
            else SharedState(sc, self.metrics.registry, {u.name: u.breaker for u in self.upstreams})
        )
        self.keys = KeyStore(
            config.keys,
            require=config.require_key,
            shared=self.shared.limits if self.shared else None,
            local_share=sc.local_share if self.shared else 1.0,
        )
        self.metrics_public = config.metrics_public
        self.started = time.time()
        self.limits = self.client_limits()
        self.guard = RequestGuard(self.limits, self.key_needed, own_headers)
        #: The embedded engine's own endpoints, when an upstream is the embedded engine.
        self.engine = EngineRoutes.of(self)
        self._listener: Listener | None = None
        self.port: int | None = None

    @property
    def listener(self) -> Listener | None:
        """The listener while the gateway runs: its per-client connection counts."""
        return self._listener

    @property
    def url(self) -> str:
        return f"http://{self.config.host}:{self.port}"

    def model_names(self) -> set[str]:
        """Every model name clients may send that the gateway knows of (upstreams'
        lists, their renames, fallback chains), for "did you mean"."""
        names = {m for u in self.upstreams for m in (*u.models, *u.cfg.model_map)}
        return names | {m for k, v in self.config.fallbacks.items() for m in (k, *v)}

    # -- app ------------------------------------------------------------------------------
    def app(self) -> web.Application:
        app = web.Application(
            client_max_size=self.config.max_body_bytes, middlewares=[self.guard.middleware]
        )
        routes: dict[str, dict[str, Handler]] = {
            path: {"POST": self._make_handler(endpoint, path)}
            for path, endpoint in ENDPOINTS.items()
            if self.engine is None or endpoint in self.engine.endpoints
        }
        routes["/v1/models"] = {"GET": self.models}
        routes["/metrics"] = {"GET": self.prom}
        routes["/health"] = {"GET": self.health}
        routes["/stats"] = {"GET": self.stats}
        routes["/upstreams/{name}/limit"] = {"PUT": self.set_limit}
        if self.engine is not None:
            routes.update(self.engine.routes())
        for path, methods in routes.items():
            self.guard.add_routes(app, path, methods)
        self.guard.add_catch_all(app)
        app.on_startup.append(self._on_startup)
        app.on_cleanup.append(self._on_cleanup)
        return app

    async def _on_startup(self, app: web.Application) -> None:
        for u in self.upstreams:
            await u.start()
        models = {m for u in self.upstreams for m in u.models}
        models |= {m for chain in self.config.fallbacks.values() for m in chain}
        self.metrics.served(sorted(models), [k.name for k in self.config.keys] or ["-"])
        if self.shared is not None:
            await self.shared.start()

    async def _on_cleanup(self, app: web.Application) -> None:
        if self.shared is not None:
            await self.shared.close()
        await self.merger.batcher.close()
        for u in self.upstreams:
            await u.close()

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Gateway]:
        """Serve on ``config.host:config.port`` (0 = a free port) until the block exits."""
        await self.start()
        try:
            yield self
        finally:
            await self.stop()

    def client_limits(self) -> ClientLimits:
        """Slow and malformed clients (:mod:`.listener`), counted as rejections."""
        c = self.config
        rejections = self.metrics.rejections
        return ClientLimits(
            head_timeout_s=c.client_header_timeout_s,
            body_timeout_s=c.client_body_timeout_s,
            keepalive_timeout_s=c.keepalive_timeout_s,
            max_connections_per_client=c.max_connections_per_client,
            max_body_bytes=c.max_body_bytes,
            on_event=lambda reason: rejections.labels(reason).inc(),
            headers=own_headers,
        )

    def key_needed(self, request: web.Request) -> web.StreamResponse | None:
        """A 401 when ``request`` needs a key it lacks (all paths but /health, and
        /metrics when it is public)."""
        if request.path == "/health" or (self.metrics_public and request.path == "/metrics"):
            return None
        return self._denied(request)

    async def start(self) -> None:
        # A taken port fails here, before the upstreams are contacted: one line.
        check_can_listen(self.config.host, self.config.port)
        self._listener = Listener(self.app(), self.limits)
        await self._listener.start(self.config.host, self.config.port)
        self.port = self._listener.port

    async def stop(self) -> None:
        if self._listener is not None:
            await self._listener.stop()
            self._listener = None

    # -- OpenAI endpoints ---------------------------------------------------------------------
    def _make_handler(self, endpoint: str, path: str) -> Any:
        async def handler(request: web.Request) -> web.StreamResponse:
            return await self.handle(request, endpoint, path)

        return handler

    def _deadline(self, request: web.Request, arrival: float) -> float:
        raw = request.headers.get(self.config.deadline_header)
        if raw is None:
            return arrival + self.config.default_deadline_s
        try:
            ms = float(raw)
        except ValueError:
            ms = -1.0
        if not (0 < ms <= self.config.max_deadline_s * 1000.0):
            raise InputError(
                f"{self.config.deadline_header} must be milliseconds in "
                f"(0, {self.config.max_deadline_s * 1000:.0f}]",
                code="invalid_deadline",
            )
        return arrival + ms / 1000.0

    def _priority(self, request: web.Request) -> int:
        raw = request.headers.get(self.config.priority_header)
        if raw is None:
            return 0
        try:
            p = int(raw)
        except ValueError:
            p = 1 << 20
        if not -100 <= p <= 100:
            raise InputError(
                f"{self.config.priority_header} must be an integer in [-100, 100]",
                code="invalid_priority",
            )
        return p

    async def handle(self, request: web.Request, endpoint: str, path: str) -> web.StreamResponse:
        arrival = time.monotonic()
        rid = request.headers.get("X-Request-Id", "")
        if not rid or not _RID_OK.match(rid):
            rid = request_id()
        call: Call | None = None
        model = "-"
        kind: str | None = None
        resp: web.StreamResponse
        try:
            key = self.keys.authenticate(request.headers.get(hdrs.AUTHORIZATION))
            body = parse_body(await read_body(request, self.limits))
            model, stream = validate(endpoint, body)
            if self.engine is not None:
                self.engine.check(endpoint, model, body)
            deadline = self._deadline(request, arrival)
            priority = self._priority(request)
            so = body.get("stream_options")
            call = Call(
                request_id=rid,
                endpoint=endpoint,
                path=path,
                body=body,
                model=model,
                stream=stream,
                key=key,
                arrival=arrival,
                deadline=deadline,
                priority=priority,
                # Only cost rules route by size: without one, skip walking the input.
                est_tokens=estimate_tokens(endpoint, body) if self.router.cost_rules else 0,
                wants_usage=bool(isinstance(so, dict) and so.get("include_usage")),
            )
            call.extra["session"] = request.headers.get(SESSION_HEADER)
            if not self.router.known(model) and not any(
                self.router.known(m) for m in self.router.chain(model, call.est_tokens)
            ):
                raise model_not_found(model, "this gateway", self.model_names())
            await self.keys.admit(key)
            if stream:
                resp = await self.proxy.stream(call, request)
            elif self.merger.batchable(call):
                doc = await self.merger.submit(call)
                self.proxy.note_usage(call, doc.get("usage"))
                resp = self.proxy.json_response(call, doc)
            else:
                doc = await self.proxy.fetch_json(call)
                resp = self.proxy.json_response(call, doc)
        except TimeoutError:  # the batch wait ran past the deadline
            resp = self._error(call, rid, DeadlineExceeded("request deadline passed"))
            kind = "DeadlineExceeded"
        except InfersightError as e:
            if call is not None and call.committed:
                raise  # headers already sent; nothing sensible left to answer
            resp, kind = self._error(call, rid, e), e.kind
            if isinstance(e, ClientFault):
                resp.force_close()  # the rest of the body can no longer be trusted
        except (ConnectionError, Cancelled):
            # The client went away (499, as nginx logs it); nothing can reach it any more.
            if call is not None:
                call.status, call.error = 499, "Cancelled"
            resp, kind = web.Response(status=499), "Cancelled"
        except asyncio.CancelledError:
            # The client hung up while we waited (aiohttp cancels the handler): the
            # upstream call was cancelled with it, freeing its slot there. Log it, then
            # let the cancellation finish.
            if call is not None:
                call.status, call.error = 499, "Cancelled"
            self._finish(call, endpoint, rid, arrival, 499, "Cancelled")
            raise
        self._finish(call, endpoint, rid, arrival, resp.status, kind)
        return resp
