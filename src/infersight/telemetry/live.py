"""Watch a live server for a while: its /metrics, the host and GPUs, with optional
client-side probes (one small streamed request at a time) for TTFT/ITL. What was seen
comes back as a RunResult that ``diagnose`` reads like a saved run.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from typing import Any, TypedDict, Unpack

from infersight.client import Client, Timeouts
from infersight.core.endpoint import server_root
from infersight.core.errors import InfersightError
from infersight.core.records import RequestRecord, RunResult
from infersight.telemetry.wiring import build_recorder

__all__ = ["SampleOptions", "sample_url", "sample_url_async"]

log = logging.getLogger(__name__)


async def _probe_loop(
    url: str,
    api_key: str | None,
    model: str | None,
    stop: asyncio.Event,
    records: list[RequestRecord],
    max_tokens: int,
) -> None:
    async with Client(url, api_key=api_key, timeouts=Timeouts(total=30.0)) as client:
        if model is None:
            try:
                models = await client.models()
                model = models[0] if models else None
            except InfersightError as e:
                log.info("probe: cannot list models: %s", e)
        while not stop.is_set():
            rec = RequestRecord(
                request_id=uuid.uuid4().hex[:12],
                scheduled=time.monotonic(),
                labels={"level": "probe"},
            )
            body: dict[str, Any] = {
                "messages": [{"role": "user", "content": "Count from 1 to 20."}],
                "max_tokens": max_tokens,
                "stream": True,
            }
            if model:
                body["model"] = model
            try:
                await client.request("/v1/chat/completions", body, record=rec)
            except InfersightError as e:
                rec = getattr(e, "record", rec)
            records.append(rec)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=0.5)


async def sample_url_async(
    url: str,
    seconds: float,
    *,
    api_key: str | None = None,
    probe: bool = True,
    model: str | None = None,
    interval: float = 1.0,
    max_tokens: int = 16,
) -> RunResult:
    """Watch ``url`` (a server root or its ``/v1``) for ``seconds``; see :func:`sample_url`."""
    base = server_root(url)
    tel = build_recorder(interval=interval, scrape=[f"{base}/metrics"], api_key=api_key)
    rec, scraper = tel.recorder, tel.scrapers[0]
    records: list[RequestRecord] = []
    stop = asyncio.Event()
    await rec.start()
    task = (
        asyncio.create_task(_probe_loop(base, api_key, model, stop, records, max_tokens))
        if probe
        else None
    )
    try:
        await asyncio.sleep(seconds)
    finally:
        stop.set()
        if task is not None:
            try:
                await asyncio.wait_for(task, timeout=30.0)
            except (TimeoutError, asyncio.CancelledError):
                task.cancel()
        await rec.stop()
    result = RunResult(
        kind="monitor",
        config={
            "engine": {"url": base, "engine": scraper.engine or "unknown"},
            "source": "infersight diagnose --url",
            "seconds": seconds,
            "probe": probe,
        },
    )
    # names pick the peak-table row
    result.environment = {"gpus": [g for g in tel.gpus if g.get("name")]}
    result.records = records
    rec.write_to(result)
    return result


class SampleOptions(TypedDict, total=False):
    """The keywords of :func:`sample_url_async`, which :func:`sample_url` passes on."""

    api_key: str | None
    probe: bool
    model: str | None
    interval: float
    max_tokens: int


def sample_url(url: str, seconds: float, **options: Unpack[SampleOptions]) -> RunResult:
    """Watch ``url`` for ``seconds`` and return what was seen as a RunResult (kind
    ``monitor``): engine, host and GPU samples, and with ``probe`` the records of one
    small streamed chat request at a time (``max_tokens`` each)."""
    return asyncio.run(sample_url_async(url, seconds, **options))
