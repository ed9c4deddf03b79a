"""Scrape the real embedded llama.cpp engine's /metrics while it serves requests."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest

from infersight.core.records import Sample
from infersight.telemetry import EngineScraper, HostSampler, Recorder
from support.waiting import until, until_awaited

pytestmark = pytest.mark.engine


def _v(out: list[Sample], name: str) -> float | None:
    vals = [s.value for s in out if s.name == name]
    assert len(vals) == 1, (name, vals)
    return vals[0]


async def _chat(session: aiohttp.ClientSession, base: str, model: str, n: int) -> dict[str, Any]:
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "Say hello."}],
        "max_tokens": n,
        "temperature": 0,
    }
    async with session.post(f"{base}/v1/chat/completions", json=body) as r:
        assert r.status == 200
        doc: dict[str, Any] = await r.json()
        return doc


@pytest.mark.timeout(240)
async def test_live_llamacpp_metrics_normalised(engine: Any) -> None:
    sc = EngineScraper(engine.base_url, api_key=engine.api_key)
    before = await sc.sample()
    assert sc.engine == "llamacpp"
    assert _v(before, "engine.up") == 1.0
    assert _v(before, "engine.slots") == 8  # from /props total_slots (parallel=8)
    p0 = _v(before, "engine.prompt_tokens_total") or 0.0
    g0 = _v(before, "engine.generation_tokens_total") or 0.0

    headers = {"Authorization": f"Bearer {engine.api_key}"} if engine.api_key else {}
    running: list[float] = []

    async def some_running() -> float:
        running.append(_v(await sc.sample(), "engine.requests_running") or 0.0)
        return running[-1]

    # small and bounded: the shared 2-core box may be heavily loaded
    timeout = aiohttp.ClientTimeout(total=150)
    async with aiohttp.ClientSession(headers=headers, timeout=timeout) as session:
        tasks = [
            asyncio.create_task(_chat(session, engine.base_url, engine.model_name, 12))
            for _ in range(4)
        ]
        await until_awaited(some_running, "the engine to report a running request", 150, 0.05)
        docs = await asyncio.gather(*tasks)
    after = await sc.sample()
    await sc.close()

    prompt = sum(d["usage"]["prompt_tokens"] for d in docs)
    completion = sum(d["usage"]["completion_tokens"] for d in docs)
    # the engine's counters moved by what the server reported in usage (cached prompt
    # tokens are excluded by llama.cpp's counter, so prompt is an upper bound)
    assert (_v(after, "engine.generation_tokens_total") or 0) - g0 == completion
    dp = (_v(after, "engine.prompt_tokens_total") or 0) - p0
    assert 0 < dp <= prompt
    assert 1 <= max(running) <= 8  # polled while the 4 requests were in flight
    assert _v(after, "engine.requests_waiting") == 0


async def test_recorder_with_engine_pid(engine: Any) -> None:
    rec = Recorder(
        [
            HostSampler({"engine": engine.pid}, per_cpu=False),
            EngineScraper(engine.base_url, api_key=engine.api_key),
        ],
        interval=0.2,
    )
    want = {
        "process.cpu_percent",
        "process.rss_bytes",
        "engine.requests_running",
        "engine.up",
        "host.cpu_percent",
    }
    async with rec:
        # CPU shares come from the second round on (the first has no interval)
        await until(lambda: want <= {s.name for s in rec.samples()}, "a second round")
    rss = [s.value for s in rec.samples() if s.name == "process.rss_bytes"]
    assert all(v is not None and v > 50e6 for v in rss)  # the model is loaded in there
