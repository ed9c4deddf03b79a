"""Merge batchable requests into one upstream call and cut the answer back per caller.

This covers embeddings and non-streamed completions with prompt lists; *when* a batch
is flushed is :class:`~infersight.gateway.dynamic_batching.DynamicBatcher`'s job.

Concurrent requests with the same model and parameters are merged into one upstream
call whose input is the concatenation of theirs; the answer's ``data`` (embeddings)
or ``choices`` (completions) is cut back into each caller's slice, re-indexed from 0.
Usage is shared out in proportion to each caller's input length (the upstream only
reports the batch's total). If the upstream rejects a merged batch as a bad request,
each caller's request is retried alone so only the faulty one gets the error.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Hashable
from typing import Any

import orjson

from infersight.core.errors import BadRequest, MalformedStream
from infersight.gateway.config import BatchingConfig
from infersight.gateway.dynamic_batching import DynamicBatcher
from infersight.gateway.metrics import GatewayMetrics
from infersight.gateway.proxy import Call, Proxy

__all__ = ["BatchMerger"]

_FIELD = {"embeddings": ("input", "data"), "completions": ("prompt", "choices")}


def _inputs(v: Any) -> tuple[list[Any], str]:
    """Normalise to a list of single inputs; also return the input kind."""
    if isinstance(v, str):
        return [v], "text"
    if v and all(isinstance(x, int) for x in v):
        return [v], "tokens"
    return list(v), "text" if isinstance(v[0], str) else "tokens"


def _length(x: Any) -> int:
    return len(x) if isinstance(x, str | list) else 1


class BatchMerger:
    """Routes batchable calls through a :class:`DynamicBatcher`."""

    def __init__(self, cfg: BatchingConfig, proxy: Proxy, metrics: GatewayMetrics) -> None:
        self.cfg = cfg
        self.proxy = proxy
        self.metrics = metrics
        self.batcher: DynamicBatcher[Call, dict[str, Any]] = DynamicBatcher(
            self._run,
            max_batch_size=cfg.max_batch_size,
            max_wait=cfg.max_wait_ms / 1000.0,
            length_ratio=cfg.length_ratio,
        )

    def batchable(self, call: Call) -> bool:
        if not self.cfg.enabled or call.stream or call.endpoint not in self.cfg.endpoints:
            return False
        if call.endpoint == "completions":
            b = call.body
            return b.get("n") in (None, 1) and not b.get("best_of") and not b.get("echo")
        return True

    async def submit(self, call: Call) -> dict[str, Any]:
        """Wait for this call's own slice of a batch (or its own error)."""
        field = _FIELD[call.endpoint][0]
        inputs, kind = _inputs(call.body[field])
        call.extra["inputs"] = inputs
        params = {k: v for k, v in call.body.items() if k != field}
        key: Hashable = (call.endpoint, kind, orjson.dumps(params, option=orjson.OPT_SORT_KEYS))
        length = sum(_length(x) for x in inputs) // max(1, len(inputs))
        timeout = max(0.0, call.deadline - time.monotonic())
        async with asyncio.timeout(timeout):
            return await self.batcher.submit(key, call, units=len(inputs), length=length)

    async def _run(self, key: Hashable, calls: list[Call]) -> list[dict[str, Any] | BaseException]:
        endpoint = calls[0].endpoint
        self.metrics.batches.labels(endpoint).observe(len(calls))
        if len(calls) == 1:
            return [await self._single(calls[0])]
        try:
            return await self._merged(calls)
        except BadRequest:
            # One caller's input may be at fault: let each find out on its own.
            return list(
                await asyncio.gather(*(self._single(c) for c in calls), return_exceptions=True)
            )

    async def _single(self, call: Call) -> dict[str, Any]:
        return await self.proxy.fetch_json(call)

    async def _merged(self, calls: list[Call]) -> list[dict[str, Any] | BaseException]:
        started = time.monotonic()
        first = calls[0]
        in_field, out_field = _FIELD[first.endpoint]
        merged_inputs = [x for c in calls for x in c.extra["inputs"]]
        batch = Call(
            request_id=f"{first.request_id}+{len(calls) - 1}",
            endpoint=first.endpoint,
            path=first.path,
            body={**first.body, in_field: merged_inputs},
            model=first.model,
            stream=False,
            key=None,
            arrival=min(c.arrival for c in calls),
            deadline=max(c.deadline for c in calls),
            priority=max(c.priority for c in calls),
            est_tokens=sum(c.est_tokens for c in calls),
        )
        resp = await self.proxy.fetch_json(batch)
        items = resp.get(out_field)
        if not isinstance(items, list) or len(items) != len(merged_inputs):
            raise MalformedStream(
                f"upstream returned {len(items) if isinstance(items, list) else 'no'} "
                f"{out_field} items for a batch of {len(merged_inputs)} inputs"
            )
        items = sorted(items, key=lambda d: d.get("index", 0) if isinstance(d, dict) else 0)
        usage = resp.get("usage") if isinstance(resp.get("usage"), dict) else None
        lengths = [sum(_length(x) for x in c.extra["inputs"]) for c in calls]
        text_len = sum(len(str(d.get("text", ""))) for d in items if isinstance(d, dict))
        total_len = max(1, sum(lengths))
        out: list[dict[str, Any] | BaseException] = []
        off = 0
        for i, c in enumerate(calls):
            n = len(c.extra["inputs"])
            part = []
            for j, d in enumerate(items[off : off + n]):
                part.append({**d, "index": j} if isinstance(d, dict) else d)
            off += n
            doc = {k: v for k, v in resp.items() if k not in (out_field, "usage")}
            doc[out_field] = part
            if usage is not None:
                doc["usage"] = _share(usage, lengths[i] / total_len, part, text_len)
            c.upstream, c.served_model = batch.upstream, batch.served_model
            # Waiting for the batch to fill is queueing too, so it counts in X-Queue-Delay.
            c.queue_delay = batch.queue_delay + (started - c.arrival)
            c.attempts = batch.attempts
            c.failovers, c.via = batch.failovers, batch.via
            c.extra["batch_size"] = len(calls)
            out.append(doc)
        return out


def _share(
    usage: dict[str, Any], fraction: float, part: list[Any], text_len: int
) -> dict[str, Any]:
    """This caller's share of the batch's usage: prompt by input length, output by text."""
    out: dict[str, Any] = {}
    pt = usage.get("prompt_tokens")
    if isinstance(pt, int):
        out["prompt_tokens"] = round(pt * fraction)
    ct = usage.get("completion_tokens")
    if isinstance(ct, int):
        mine = sum(len(str(d.get("text", ""))) for d in part if isinstance(d, dict))
        out["completion_tokens"] = round(ct * mine / text_len) if text_len else 0
    out["total_tokens"] = out.get("prompt_tokens", 0) + out.get("completion_tokens", 0)
    return out
