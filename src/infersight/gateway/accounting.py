"""Accounting of each request the gateway answers: its error answer, the metrics, the
spend per key and the one JSON access-log line; and the 401 for a missing key."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

import orjson
from aiohttp import hdrs, web

from infersight.core.access_log_format import (
    ACCESS_LOG_VERSION,
    AccessLogLine,
    prompt_fingerprint,
    session_label,
)
from infersight.core.errors import InfersightError, InvalidRequest
from infersight.gateway.access_log_writer import access_log, line_sink
from infersight.gateway.call import request_id
from infersight.gateway.error_answers import error_response
from infersight.gateway.errors import KeyRefused, KeyThrottled

if TYPE_CHECKING:
    from infersight.gateway.auth import KeyStore
    from infersight.gateway.call import Call
    from infersight.gateway.config import GatewayConfig
    from infersight.gateway.metrics import GatewayMetrics
    from infersight.gateway.router import Router

__all__ = ["Accounting"]


class Accounting:
    """Mixed into :class:`~infersight.gateway.server.Gateway`."""

    config: GatewayConfig
    metrics: GatewayMetrics
    router: Router
    keys: KeyStore

    def _denied(self, request: web.Request) -> web.Response | None:
        """A 401 (counted and logged) for a request without a valid key, else None."""
        arrival = time.monotonic()
        try:
            self.keys.authenticate(request.headers.get(hdrs.AUTHORIZATION))
        except KeyRefused as e:
            rid = request_id()
            resp = self._error(None, rid, e)
            self._finish(None, "admin", rid, arrival, resp.status, e.kind)
            return resp
        return None

    def _error(self, call: Call | None, rid: str, e: InfersightError) -> web.Response:
        resp = error_response(e, rid, (call.queue_delay * 1000.0) if call else 0.0)
        if call is not None:
            call.status, call.error = resp.status, e.kind
        # Gateway-side refusals; admission and routing sheds are counted where they happen.
        if isinstance(e, InvalidRequest):
            self.metrics.rejections.labels("bad_request").inc()
        elif isinstance(e, KeyRefused):
            self.metrics.rejections.labels("auth").inc()
        elif isinstance(e, KeyThrottled):
            self.metrics.rejections.labels("rate_limited").inc()
        return resp

    def _finish(
        self,
        call: Call | None,
        endpoint: str,
        rid: str,
        arrival: float,
        status: int | None = None,
        kind: str | None = None,
    ) -> None:
        now = time.monotonic()
        m = self.metrics
        known = call is not None and self.router.known(call.model)
        mlabel = call.model if call is not None and known else ("-" if call is None else "unknown")
        up = call.upstream if call is not None else "-"
        st = (call.status if call is not None and call.status else status) or 0
        err = (
            (call.error if call is not None else None)
            or kind
            or ("none" if st < 400 else "BadRequest")
        )
        m.child(m.requests, endpoint, mlabel, up, str(st), err).inc()
        if err != "none":
            m.child(m.errors, err).inc()
        if call is not None:
            served = call.served_model or call.model
            m.child(m.latency, mlabel, up).observe(now - arrival)
            if call.ttft is not None:
                m.child(m.ttft, mlabel, up).observe(call.ttft)
            if call.prompt_tokens or call.completion_tokens:
                call.cost = m.account(served, call.key, call.prompt_tokens, call.completion_tokens)
                self.keys.charge_tokens(
                    call.key, call.prompt_tokens + call.completion_tokens, call.cost
                )
        if not self.config.access_log:
            return
        sink = line_sink()
        if sink is None and not access_log.isEnabledFor(logging.INFO):
            return
        ms = round((now - arrival) * 1000.0, 3)
        wall = time.time()
        # docs/access-log.md: the format replay reads (bench --trace), versioned.
        arrival_ts = round(wall - ms / 1000.0, 6)
        line: AccessLogLine = {
            "v": ACCESS_LOG_VERSION,
            "ts": wall,
            "arrival_ts": arrival_ts,
            "request_id": rid,
            "endpoint": endpoint,
            "status": st,
            "latency_ms": ms,
        }
        if call is None:
            line["error"] = err
        else:
            line.update(
                {
                    "model": call.model,
                    "served_model": call.served_model,
                    "upstream": up,
                    "stream": call.stream,
                    "key": call.key,
                    "error": call.error,
                    "queue_ms": round(call.queue_delay * 1000.0, 3),
                    "attempts": call.attempts,
                    "failovers": call.failovers,
                    "ttft_ms": None if call.ttft is None else round(call.ttft * 1000.0, 3),
                    "prompt_tokens": call.prompt_tokens,
                    "completion_tokens": call.completion_tokens,
                    "cost_usd": call.cost,
                }
            )
            if call.via is not None:
                line["via"] = call.via
            if call.truncated:
                line["truncated"] = True
            if call.usage_estimated:
                line["usage_estimated"] = True
            _replay_fields(line, call, self.config.access_log_fingerprints)
        if sink is not None:
            sink(orjson.dumps(line))
        else:
            access_log.info(orjson.dumps(line).decode())


def _replay_fields(line: AccessLogLine, call: Call, fingerprints: bool) -> None:
    """What replay needs beyond the accounting: the requested output cap, the session
    label (hashed) and the prompt's message fingerprints (docs/access-log.md)."""
    mt = call.body.get("max_completion_tokens", call.body.get("max_tokens"))
    if isinstance(mt, int) and not isinstance(mt, bool):
        line["max_tokens"] = mt
    sid = call.extra.get("session")
    if isinstance(sid, str) and sid:
        line["session"] = session_label(sid)
    if fingerprints:
        line["prefix"] = prompt_fingerprint(call.endpoint, call.body)
