"""Forwarding: the upstream call of each attempt, and stream passthrough.

Which upstream tries a request, and what each failure does, is
:class:`~infersight.gateway.failover.Failover`'s. Once the first byte of a stream was
written to the client there is no failover: a later break ends the stream with an
SSE error event and is recorded as ``TruncatedStream``.

Streams are passed through read by read (``StreamResponse.raw_chunks``): the whole
events each upstream read completed are written to the client at once, exactly as
received, never buffered longer and never split mid-event.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import orjson
from aiohttp import web

from infersight.client import Client, RequestOptions
from infersight.core.errors import DeadlineExceeded, InfersightError, TruncatedStream
from infersight.gateway.call import Call
from infersight.gateway.cost_stamp import COST_HEADER, cost_text, stamp_usage
from infersight.gateway.error_answers import error_body
from infersight.gateway.failover import Failover
from infersight.gateway.public import public_message
from infersight.gateway.request_body import estimate_prompt_tokens
from infersight.gateway.router import Candidate
from infersight.gateway.upstream import Upstream

__all__ = ["Call", "Proxy"]

_SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
_DONE = b"data: [DONE]\n\n"


def _clamp_max_tokens(body: dict[str, Any], cap: int) -> dict[str, Any]:
    """``body`` with its output limit at most ``cap`` (set to ``cap`` when absent)."""
    out = dict(body)
    given = [k for k in ("max_completion_tokens", "max_tokens") if k in body]
    for k in given or ["max_tokens"]:
        v = body.get(k)
        out[k] = cap if not isinstance(v, int) or isinstance(v, bool) or v > cap else v
    return out


def _queue_ms(seconds: float) -> str:
    """X-Queue-Delay's value (milliseconds, 3 decimals); most requests never queue."""
    return "0.000" if seconds == 0.0 else f"{seconds * 1000.0:.3f}"


class Proxy(Failover):
    """Forwards calls (JSON or streamed) through :class:`Failover`'s candidates."""

    def _body_for(self, call: Call, cand: Candidate, up: Upstream) -> dict[str, Any]:
        wire = up.wire_model(cand.model)  # the upstream's own name for it
        body = call.body if wire == call.model else {**call.body, "model": wire}
        if call.stream and not call.wants_usage:
            so = body.get("stream_options") or {}
            body = {**body, "stream_options": {**so, "include_usage": True}}
        cap = cand.upstream.cfg.max_tokens_cap if isinstance(cand.upstream, Upstream) else None
        if cap is not None and call.endpoint != "embeddings":
            body = _clamp_max_tokens(body, cap)
        return body

    def _delivered(self, call: Call, sr: Any) -> None:
        """Tokens of a stream that ended early: the upstream's usage if it came, else
        what was delivered (content chunks) and the prompt it read, marked estimated,
        so usage and cost are not undercounted."""
        usage = getattr(sr, "usage", None)
        if usage is not None:
            self.note_usage(call, usage)
            return
        rec = getattr(sr, "record", None)
        call.completion_tokens = sum(rec.chunk_tokens) if rec is not None else 0
        call.prompt_tokens = estimate_prompt_tokens(call.endpoint, call.body)
        call.usage_estimated = True

    def note_usage(self, call: Call, usage: Any) -> None:
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
            body = self._body_for(call, cand, up)
            comp = await up.client.request(call.path, body, **_options(call, up, up.client))
            self._count_attempts(call, up, comp.record.attempts or 1)
            resp = comp.response if isinstance(comp.response, dict) else {}
            self.note_usage(call, comp.usage or resp.get("usage"))
            return resp

        return await self.run(call, attempt)

    def json_response(self, call: Call, doc: dict[str, Any]) -> web.Response:
        call.status = 200
        # One headers dict with the content type in it: cheaper than aiohttp's
        # content_type argument, which re-parses and re-sets the header.
        headers = {
            "Content-Type": "application/json",
            "X-Request-Id": call.request_id,
            "X-Queue-Delay": _queue_ms(call.queue_delay),
        }
        dollars = self._cost(call)
        if dollars is not None:
            headers[COST_HEADER] = cost_text(dollars)
        return web.Response(body=orjson.dumps(doc), headers=headers)

    def _cost(self, call: Call) -> float | None:
        """The request's dollars from its usage (None: no usage or no price)."""
        if not (call.prompt_tokens or call.completion_tokens):
            return None
        return self.metrics.price_of(
            call.served_model or call.model, call.prompt_tokens, call.completion_tokens
        )

    # -- streamed ---------------------------------------------------------------------------
    async def stream(self, call: Call, request: web.Request) -> web.StreamResponse:
        """Pass a stream through; fail over only until the first byte is written."""

        async def attempt(up: Upstream, cand: Candidate) -> web.StreamResponse:
            assert up.stream_client is not None
            self.metrics.child(self.metrics.upstream_calls, up.name, call.endpoint).inc()
            body = self._body_for(call, cand, up)
            cm = up.stream_client.stream(call.path, body, **_options(call, up, up.stream_client))
            async with cm as sr:
                call.first_content_at = time.monotonic()
                self._count_attempts(call, up, sr.record.attempts or 1)
                resp = web.StreamResponse(
                    status=200,
                    headers={
                        **_SSE_HEADERS,
                        "X-Request-Id": call.request_id,
                        "X-Queue-Delay": _queue_ms(call.queue_delay),
                    },
                )
                await resp.prepare(request)
                call.committed = True
                call.status = 200
                await self._pump(call, sr, resp, up)
                return resp

        return await self.run(call, attempt)

    async def _pump(self, call: Call, sr: Any, resp: web.StreamResponse, up: Upstream) -> None:
        write = resp.write
        try:
            if not getattr(sr, "is_sse", True):
                # The upstream ignored "stream": relay its body as one event.
                async for ev in sr.events():
                    self.note_usage(call, ev.json.get("usage") if ev.json else None)
                    call.ttft = time.monotonic() - call.arrival
                    await write(b"data: " + orjson.dumps(ev.json) + b"\n\n")
            else:
                # Passthrough: one write per upstream read, whole events, bytes as received
                # (the client fills the record and finds usage/finish/[DONE]/errors).
                # The usage chunk the client asked for gets the cost (after the finish).
                stamp = call.wants_usage and self.metrics.priced(call.served_model or call.model)
                async for piece in sr.raw_chunks(drop_usage_only=not call.wants_usage):
                    if call.ttft is None:  # the first piece holds the first content
                        call.ttft = time.monotonic() - call.arrival
                    if stamp and sr.usage is not None and sr.finish_reason is not None:
                        self.note_usage(call, sr.usage)
                        dollars = self._cost(call)
                        stamped = stamp_usage(piece, dollars) if dollars is not None else None
                        if stamped is not None:
                            piece, stamp = stamped, False
                    await write(piece)
        except ConnectionError:
            # The client hung up: stop; leaving the upstream stream drops that request too.
            call.status, call.error = 499, "Cancelled"
            self._delivered(call, sr)
            return
        except asyncio.CancelledError:
            call.status, call.error = 499, "Cancelled"  # hung up while we waited upstream
            self._delivered(call, sr)
            raise
        except InfersightError as e:
            # Content already reached the client: end with an SSE error event, never [DONE].
            # The client's own deadline ending an answer in progress is no upstream fault.
            cut = isinstance(e, DeadlineExceeded)
            call.error = "DeadlineExceeded" if cut else "TruncatedStream"
            call.truncated = True
            self._delivered(call, sr)
            self.metrics.truncations.labels(call.served_model or call.model, call.upstream).inc()
            self.failures.failure(e, up.name, up.cfg.url, failover=False)
            trunc = TruncatedStream(
                "the stream broke after content was sent: " + public_message(e, call.upstream)
            )
            with contextlib.suppress(ConnectionError):
                await write(b"data: " + orjson.dumps(error_body(trunc)) + b"\n\n")
                await resp.write_eof()
            return
        if getattr(sr, "usage", None) is not None:
            self.note_usage(call, sr.usage)
        with contextlib.suppress(ConnectionError):
            if not getattr(sr, "done", False):
                await write(_DONE)
            await resp.write_eof()


def _options(call: Call, up: Upstream, client: Client) -> RequestOptions:
    """One attempt's keywords: the call's deadline, id and retry; the upstream's timeouts."""
    return {
        "deadline": call.deadline,
        "request_id": call.request_id,
        "timeouts": up.attempt_timeouts(client, call),
        "retry": call.retry,
    }
