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
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.web_protocol import RequestPayloadError

from infersight.core.access_log import SESSION_HEADER
from infersight.core.errors import Cancelled, DeadlineExceeded, InfersightError
from infersight.core.httpguard import GuardedRunner, GuardSettings, MalformedRequest
from infersight.core.listen import check_can_listen, listen_error
from infersight.core.pricing import PriceTable
from infersight.gateway.admin import AdminEndpoints
from infersight.gateway.auth import KeyStore
from infersight.gateway.call import request_id
from infersight.gateway.config import GatewayConfig
from infersight.gateway.errors import InputError
from infersight.gateway.http import ENDPOINTS, error_response, estimate_tokens, parse_body, validate
from infersight.gateway.metrics import GatewayMetrics
from infersight.gateway.proxy import Call, Proxy
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
        self.shared = None if sc.redis_url is None else SharedState(
            sc, self.metrics.registry, {u.name: u.breaker for u in self.upstreams}
        )
        self.keys = KeyStore(
            config.keys, require=config.require_key,
            shared=self.shared.limits if self.shared else None,
            local_share=sc.local_share if self.shared else 1.0,
        )
        self.metrics_public = config.metrics_public
        self.started = time.time()
        self._runner: web.AppRunner | None = None
        self.port: int | None = None

    @property
    def url(self) -> str:
        return f"http://{self.config.host}:{self.port}"

    # -- app ------------------------------------------------------------------------------
    def app(self) -> web.Application:
        app = web.Application(client_max_size=self.config.max_body_bytes)
        for path, endpoint in ENDPOINTS.items():
            app.router.add_post(path, self._make_handler(endpoint, path))
        app.router.add_get("/v1/models", self.models)
        app.router.add_get("/metrics", self.prom)
        app.router.add_get("/health", self.health)
        app.router.add_get("/stats", self.stats)
        # Anything else gets an OpenAI-style error body too (aiohttp's default is text).
        for path in ENDPOINTS:
            app.router.add_route("*", path, self._method_not_allowed)
        app.router.add_route("*", "/{tail:.*}", self._not_found)
        app.on_startup.append(self._on_startup)
        app.on_cleanup.append(self._on_cleanup)
        return app

    async def _on_startup(self, app: web.Application) -> None:
        for u in self.upstreams:
            await u.start()
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

    def guard(self) -> GuardSettings:
        """Slow and malformed clients (core.httpguard), counted as rejections."""
        c = self.config
        rejections = self.metrics.rejections
        return GuardSettings(
            head_timeout_s=c.client_header_timeout_s,
            body_timeout_s=c.client_body_timeout_s,
            idle_timeout_s=c.keepalive_timeout_s,
            max_connections_per_client=c.max_connections_per_client,
            on_event=lambda reason: rejections.labels(reason).inc(),
            headers=lambda: {"X-Request-Id": request_id(), "X-Queue-Delay": "0.000"},
        )

    async def start(self) -> None:
        # A taken port fails here, before the upstreams are contacted: one line.
        check_can_listen(self.config.host, self.config.port)
        self._runner = GuardedRunner(
            self.app(), self.guard(), access_log=None, handle_signals=False
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.config.host, self.config.port, backlog=1024)
        try:
            await site.start()
        except OSError as e:
            await self.stop()  # closes the upstreams' sessions: no "Unclosed" warnings
            raise listen_error(self.config.host, self.config.port, e) from None
        server = site._server
        sockets = getattr(server, "sockets", None) or []
        self.port = sockets[0].getsockname()[1] if sockets else self.config.port

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

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
            body = parse_body(await self._read(request))
            model, stream = validate(endpoint, body)
            deadline = self._deadline(request, arrival)
            priority = self._priority(request)
            so = body.get("stream_options")
            call = Call(
                request_id=rid, endpoint=endpoint, path=path, body=body, model=model,
                stream=stream, key=key, arrival=arrival, deadline=deadline, priority=priority,
                # Only cost rules route by size: without one, skip walking the input.
                est_tokens=estimate_tokens(endpoint, body) if self.router.cost_rules else 0,
                wants_usage=bool(isinstance(so, dict) and so.get("include_usage")),
            )
            call.extra["session"] = request.headers.get(SESSION_HEADER)
            if not self.router.known(model) and not any(
                self.router.known(m) for m in self.router.chain(model, call.est_tokens)
            ):
                raise InputError(
                    f"model {model!r} is not served by this gateway (see GET /v1/models)",
                    param="model", code="model_not_found", status=404,
                )
            await self.keys.admit(key, call.est_tokens)
            if stream:
                resp = await self.proxy.stream(call, request)
            elif self.merger.batchable(call):
                doc = await self.merger.submit(call)
                self.proxy._usage(call, doc.get("usage"))
                resp = self.proxy.json_response(call, doc)
            else:
                doc = await self.proxy.fetch_json(call)
                resp = self.proxy.json_response(call, doc)
        except TimeoutError:  # the batch wait ran past the deadline
            resp = self._error(call, rid, DeadlineExceeded("request deadline passed"), model)
            kind = "DeadlineExceeded"
        except InfersightError as e:
            if call is not None and call.committed:
                raise  # headers already sent; nothing sensible left to answer
            resp, kind = self._error(call, rid, e, model), e.kind
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
            self._finish(call, endpoint, model, rid, arrival, 499, "Cancelled")
            raise
        self._finish(call, endpoint, model, rid, arrival, resp.status, kind)
        return resp

    async def _read(self, request: web.Request) -> bytes:
        """The body, or the client's fault as a 4xx (the guard's 408/400 pass through)."""
        try:
            return await request.read()
        except web.HTTPRequestEntityTooLarge:
            raise InputError(
                f"request body exceeds {self.config.max_body_bytes} bytes",
                code="body_too_large", status=413,
            ) from None
        except (RequestPayloadError, HttpProcessingError) as e:
            raise MalformedRequest(f"malformed request body: {type(e).__name__}") from None

    async def _not_found(self, request: web.Request) -> web.Response:
        if (denied := self._denied(request)) is not None:
            return denied
        return error_response(
            InputError(
                f"no such endpoint: {request.method} {request.path}", code="not_found", status=404
            ),
            request_id(),
        )

    async def _method_not_allowed(self, request: web.Request) -> web.Response:
        if (denied := self._denied(request)) is not None:
            return denied
        return error_response(
            InputError(
                f"{request.path} accepts POST, not {request.method}",
                code="method_not_allowed",
                status=405,
            ),
            request_id(),
        )

