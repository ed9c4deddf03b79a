"""Diagnose a live server: sample its /metrics, the host and GPUs for a window, with
optional client-side probes (one small streamed request at a time) for TTFT/ITL."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from pathlib import Path
from typing import Any

from infersight.core.records import RequestRecord, RunResult, Sample

__all__ = ["load_inputs", "sample_live"]

log = logging.getLogger(__name__)


async def _probe_loop(url: str, api_key: str | None, model: str | None, stop: asyncio.Event,
                      records: list[RequestRecord], max_tokens: int) -> None:
    from infersight.client import Client, Timeouts
    from infersight.core.errors import InfersightError

    async with Client(url, api_key=api_key, timeouts=Timeouts(total=30.0)) as client:
        if model is None:
            try:
                models = await client.models()
                model = models[0] if models else None
            except InfersightError as e:
                log.info("probe: cannot list models: %s", e)
        while not stop.is_set():
            rec = RequestRecord(request_id=uuid.uuid4().hex[:12], scheduled=time.monotonic(),
                                labels={"level": "probe"})
            body: dict[str, Any] = {
                "messages": [{"role": "user", "content": "Count from 1 to 20."}],
                "max_tokens": max_tokens, "stream": True,
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


async def _sample(url: str, seconds: float, *, api_key: str | None, probe: bool,
                  model: str | None, interval: float, max_tokens: int) -> RunResult:
    from infersight.telemetry import EngineScraper, GpuSampler, HostSampler, Recorder

    base = url.rstrip("/")
    if base.endswith("/v1"):
        base = base[:-3]
    scraper = EngineScraper(f"{base}/metrics", api_key=api_key)
    samplers: list[Any] = [HostSampler(), scraper]
    gpus: list[dict[str, Any]] = []
    with contextlib.suppress(Exception):
        gpu = GpuSampler()
        gpus = [g for g in gpu.describe() if g.get("name")]  # names pick the peak-table row
        samplers.append(gpu)
    rec = Recorder(samplers, interval=interval)
    records: list[RequestRecord] = []
    stop = asyncio.Event()
    await rec.start()
    task = asyncio.create_task(_probe_loop(base, api_key, model, stop, records, max_tokens)) \
        if probe else None
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
    result = RunResult(kind="monitor", config={
        "engine": {"url": base, "engine": scraper.engine or "unknown"},
        "source": "infersight diagnose --url", "seconds": seconds, "probe": probe,
    })
    result.environment = {"gpus": gpus}
    result.records = records
    rec.write_to(result)
    return result


def sample_live(url: str, seconds: float, *, api_key: str | None = None, probe: bool = True,
                model: str | None = None, interval: float = 1.0,
                max_tokens: int = 16) -> RunResult:
    """Watch ``url`` for ``seconds`` and return what was seen as a RunResult."""
    return asyncio.run(_sample(url, seconds, api_key=api_key, probe=probe, model=model,
                               interval=interval, max_tokens=max_tokens))


def load_inputs(paths: list[Path]) -> list[tuple[str, RunResult]]:
    """RunResult files as they are; monitor recordings (JSONL) merged into one result."""
    from infersight.core.errors import ConfigError
    from infersight.core.records import load_run_result

    results: list[tuple[str, RunResult]] = []
    samples: list[Sample] = []
    rec_names: list[str] = []
    for p in paths:
        try:
            with p.open("rb") as f:
                head = f.readline(4096)
        except OSError as e:
            raise ConfigError(f"{p}: cannot read ({e.strerror})") from None
        if b"infersight_samples" in head:
            from infersight.telemetry import read_samples

            s, _ = read_samples(p)
            samples.extend(s)
            rec_names.append(p.name)
        else:
            results.append((str(p), load_run_result(p)))
    if samples:
        engines = {s.labels.get("engine") for s in samples if s.name.startswith("engine.")}
        engines.discard(None)
        eng = next(iter(engines)) if len(engines) == 1 else "unknown"
        r = RunResult(kind="monitor", config={"engine": {"url": "", "engine": eng}})
        r.samples = sorted(samples, key=lambda s: s.t)
        results.append((" + ".join(rec_names), r))
    return results
