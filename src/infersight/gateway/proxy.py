"""Forwarding with failover: admission, the upstream call, and stream passthrough.

For each candidate upstream (router order): take an admission slot, then call it.
Anything that fails *before content reached the client* (connect errors, resets,
429/503 that do not fit the deadline, 5xx, the TTFT limit, malformed streams) moves
the request to the next candidate and counts against that upstream's circuit breaker.
A client error (400...) is returned as is. Once the first byte of a stream was
written to the client there is no failover: a later break ends the stream with an
SSE error event and is recorded as ``TruncatedStream``.

Streams are passed through read by read (``StreamResponse.raw_chunks``): the whole
events each upstream read completed are written to the client at once, exactly as
received, never buffered longer and never split mid-event.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import orjson
from aiohttp import web

from infersight.core.errors import (
    AuthError,
    BadRequest,
    DeadlineExceeded,
    InfersightError,
    RateLimited,
    TruncatedStream,
)
from infersight.gateway.errors import Shed
from infersight.gateway.http import error_body
from infersight.gateway.metrics import GatewayMetrics
from infersight.gateway.router import Candidate, Router
from infersight.gateway.upstream import Upstream

__all__ = ["Call", "Proxy"]

T = TypeVar("T")

_SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
_DONE = b"data: [DONE]\n\n"


@dataclass(slots=True)
class Call:
    """One client request and what became of it (for metrics and the access log)."""

    request_id: str
    endpoint: str
    path: str
    body: dict[str, Any]
    model: str
    stream: bool
    key: str | None
    arrival: float
    deadline: float
    priority: int = 0
    est_tokens: int = 0
    wants_usage: bool = False
    upstream: str = "-"
    served_model: str | None = None
    queue_delay: float = 0.0
    attempts: int = 0
    failovers: int = 0
    status: int = 0
    error: str | None = None
    ttft: float | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = None
    #: Set once a byte of the answer reached the client: no failover after that.
    committed: bool = False
    #: When the upstream's first content arrived (streams): the limiter's latency signal.
    first_content_at: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def _upstream_fault(e: InfersightError) -> bool:
    """True when the error says something about the upstream's health."""
    return not (isinstance(e, BadRequest) and not isinstance(e, AuthError))


class Proxy:
    """Runs calls through the router's candidates with admission and failover."""

    def __init__(self, router: Router, metrics: GatewayMetrics) -> None:
        self.router = router
        self.metrics = metrics

    def _no_candidate(self, call: Call, last: InfersightError | None) -> InfersightError:
        if last is not None:
            return last
        wait = self.router.probe_wait(call.model)
        self.metrics.rejections.labels("no_upstream").inc()
        return Shed(
            f"no upstream available for model {call.model!r}: every circuit is open",
            code="no_upstream_available",
            retry_after=max(1.0, wait or 1.0),
        )

    async def run(
        self, call: Call, attempt: Callable[[Upstream, Candidate], Awaitable[T]]
    ) -> T:
        """Try ``attempt`` on each candidate until one succeeds or must not be retried."""
        last: InfersightError | None = None
        for cand in self.router.candidates(call.model, call.est_tokens):
            up = cand.upstream
            assert isinstance(up, Upstream)
            if time.monotonic() >= call.deadline:
                raise DeadlineExceeded("request deadline passed before an upstream answered")
            if (wait := up.budget_wait()) > 0:  # over its rpm/tpm: the next candidate
                last = last or Shed(f"upstream {up.name} is over its requests/tokens per minute",
                                    code="upstream_rate_limit", retry_after=wait)  # fmt: skip
                continue
            if not up.breaker.allow():
                continue
            adm = up.admission
            try:
                queued = await adm.acquire(call.deadline, call.priority)
            except Shed as e:
                up.breaker.record_neutral()
                last = e
                continue
            except BaseException:
                up.breaker.record_neutral()
                raise
            call.queue_delay += queued
            up.m_queue_delay.observe(queued)
            up.spend(requests=1)
            call.upstream = up.name
            call.served_model = cand.model
            t0 = time.monotonic()
            dropped = False
            try:
                result = await attempt(up, cand)
            except InfersightError as e:
                rec = getattr(e, "record", None)
                self._count_attempts(call, up, getattr(rec, "attempts", 1) or 1)
                if call.committed or not _upstream_fault(e):
                    up.breaker.record_neutral()
                    raise
                dropped = True
                if isinstance(e, RateLimited):
                    # "Slow down" is the limiter's business (dropped=True shrinks it) and a
                    # reason to try another replica, not proof that the upstream is broken.
                    up.breaker.record_neutral()
                else:
                    up.breaker.record_failure()
                last = e
                if isinstance(e, DeadlineExceeded) or time.monotonic() >= call.deadline:
                    raise
                call.failovers += 1
                self.metrics.failovers.labels(up.name, e.kind).inc()
                continue
            except BaseException:
                up.breaker.record_neutral()
                raise
            else:
                if call.error == "TruncatedStream":
                    up.breaker.record_failure()
                    dropped = True
                elif call.error == "Cancelled":
                    up.breaker.record_neutral()
                else:
                    up.breaker.record_success()
                up.spend(tokens=call.prompt_tokens + call.completion_tokens)
                if cand.fallback:
                    self.metrics.fallbacks.labels(call.model, cand.model).inc()
                return result
            finally:
                # For streams the limiter learns from time-to-first-content: it rises with
                # queueing inside the upstream but not with the answer's length.
                # (Queue/in-flight gauges are refreshed when /metrics is scraped.)
                end = call.first_content_at if call.first_content_at else time.monotonic()
                call.first_content_at = None
                adm.release(end - t0, dropped=dropped)
        raise self._no_candidate(call, last)

    def _count_attempts(self, call: Call, up: Upstream, attempts: int) -> None:
        call.attempts += attempts
        if attempts > 1:
            up.m_retries.inc(attempts - 1)

    def _body_for(self, call: Call, cand: Candidate, up: Upstream) -> dict[str, Any]:
        wire = up.wire_model(cand.model)  # the upstream's own name for it
        body = call.body if wire == call.model else {**call.body, "model": wire}
        if call.stream and not call.wants_usage:
            so = body.get("stream_options") or {}
            body = {**body, "stream_options": {**so, "include_usage": True}}
        return body

    def _usage(self, call: Call, usage: Any) -> None:
        if isinstance(usage, dict):
            pt, ct = usage.get("prompt_tokens"), usage.get("completion_tokens")
            call.prompt_tokens = pt if isinstance(pt, int) else 0
            call.completion_tokens = ct if isinstance(ct, int) else 0

    # -- non-streamed ------------------------------------------------------------------
    async def fetch_json(self, call: Call) -> dict[str, Any]:
        """Call upstreams with failover; return the upstream's JSON body."""

        async def attempt(up: Upstream, cand: Candidate) -> dict[str, Any]:
            assert up.client is not None
            self.metrics.child(self.metrics.upstream_calls, up.name, call.endpoint).inc()
            comp = await up.client.request(
                call.path, self._body_for(call, cand, up),
                deadline=call.deadline, request_id=call.request_id,
            )
            self._count_attempts(call, up, comp.record.attempts or 1)
            resp = comp.response if isinstance(comp.response, dict) else {}
            self._usage(call, comp.usage or resp.get("usage"))
            return resp

        return await self.run(call, attempt)

    def json_response(self, call: Call, doc: dict[str, Any]) -> web.Response:
        call.status = 200
        return web.Response(
            body=orjson.dumps(doc), content_type="application/json", headers=self.headers(call)
        )

    @staticmethod
    def headers(call: Call) -> dict[str, str]:
        return {
            "X-Request-Id": call.request_id,
            "X-Queue-Delay": f"{call.queue_delay * 1000.0:.3f}",
        }

    # -- streamed ---------------------------------------------------------------------------
    async def stream(self, call: Call, request: web.Request) -> web.StreamResponse:
        """Pass a stream through; fail over only until the first byte is written."""

        async def attempt(up: Upstream, cand: Candidate) -> web.StreamResponse:
            assert up.stream_client is not None
            self.metrics.child(self.metrics.upstream_calls, up.name, call.endpoint).inc()
            cm = up.stream_client.stream(
                call.path,
                self._body_for(call, cand, up),
                deadline=call.deadline,
                request_id=call.request_id,
            )
            async with cm as sr:
                call.first_content_at = time.monotonic()
                self._count_attempts(call, up, sr.record.attempts or 1)
                resp = web.StreamResponse(status=200, headers={**_SSE_HEADERS, **self.headers(call)})
                await resp.prepare(request)
                call.committed = True
                call.status = 200
                await self._pump(call, sr, resp)
                return resp

        return await self.run(call, attempt)

    async def _pump(self, call: Call, sr: Any, resp: web.StreamResponse) -> None:
        write = resp.write
        try:
            if not getattr(sr, "is_sse", True):
                # The upstream ignored "stream": relay its body as one event.
                async for ev in sr.events():
                    self._usage(call, ev.json.get("usage") if ev.json else None)
                    call.ttft = time.monotonic() - call.arrival
                    await write(b"data: " + orjson.dumps(ev.json) + b"\n\n")
            else:
                # Passthrough: one write per upstream read, whole events, bytes as received
                # (the client fills the record and finds usage/finish/[DONE]/errors).
                async for piece in sr.raw_chunks(drop_usage_only=not call.wants_usage):
                    if call.ttft is None:  # the first piece holds the first content
                        call.ttft = time.monotonic() - call.arrival
                    await write(piece)
        except ConnectionError:
            # The client hung up: stop; leaving the upstream stream drops that request too.
            call.status, call.error = 499, "Cancelled"
            return
        except InfersightError as e:
            # Content already reached the client: end with an SSE error event, never [DONE].
            if getattr(sr, "usage", None) is not None:
                self._usage(call, sr.usage)
            call.error = "TruncatedStream"
            self.metrics.truncations.labels(call.served_model or call.model, call.upstream).inc()
            trunc = TruncatedStream(f"upstream stream broke after content was sent: {e}")
            with contextlib.suppress(ConnectionError):
                await write(b"data: " + orjson.dumps(error_body(trunc)) + b"\n\n")
                await resp.write_eof()
            return
        if getattr(sr, "usage", None) is not None:
            self._usage(call, sr.usage)
        with contextlib.suppress(ConnectionError):
            if not getattr(sr, "done", False):
                await write(_DONE)
            await resp.write_eof()
