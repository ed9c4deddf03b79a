"""Prefix sharing for `trace_replay.py`: a trace whose shared-prefix requests repeat an
80% prefix, between unshared requests of the same length, replayed against the
embedded engine with llama.cpp's prompt cache on, then with it turned off by a proxy
that sets `cache_prompt: false` in every request (as a client or proxy may). TTFT of
the shared requests against the unshared ones, the hit rate, and the verdict."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np
from aiohttp import web

from infersight.bench import BenchConfig
from infersight.core.records import RunResult
from infersight.entrypoints.bench import bench_and_diagnose

PROMPT, SHARED = 160, 128  # 80% of a shared request's prompt is the shared block


def prefix_trace(path: Path, n: int, gap_s: float) -> None:
    """Even lines share block 1 (128 tokens) then 32 of their own; odd lines are all
    their own. Same length, same spacing."""
    with path.open("w") as f:
        for i in range(n):
            ids = [1, 1000 + i] if i % 2 == 0 else [2000 + i, 3000 + i]
            f.write(
                json.dumps(
                    {
                        "timestamp": round(i * gap_s * 1000),
                        "input_length": PROMPT,
                        "output_length": 4,
                        "hash_ids": ids,
                    }
                )
                + "\n"
            )


@contextmanager
def cache_off_proxy(upstream: str) -> Iterator[str]:
    """A pass-through HTTP proxy that adds ``cache_prompt: false`` to chat requests."""
    ready = threading.Event()
    box: dict[str, Any] = {}

    async def handle(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        if request.method == "POST" and request.path.endswith("/chat/completions"):
            doc = json.loads(body)
            doc["cache_prompt"] = False
            body = json.dumps(doc).encode()
        sess: aiohttp.ClientSession = box["session"]
        async with sess.request(
            request.method,
            upstream + request.path_qs,
            data=body,
            headers={"Content-Type": "application/json"},
        ) as r:
            out = web.StreamResponse(
                status=r.status,
                headers={"Content-Type": r.headers.get("Content-Type", "application/json")},
            )
            await out.prepare(request)
            async for chunk in r.content.iter_any():
                await out.write(chunk)
            await out.write_eof()
            return out

    async def serve() -> None:
        box["session"] = aiohttp.ClientSession()
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", handle)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        box["port"] = runner.addresses[0][1]
        box["stop"] = asyncio.Event()
        ready.set()
        await box["stop"].wait()
        await box["session"].close()
        await runner.cleanup()

    loop = asyncio.new_event_loop()
    t = threading.Thread(target=loop.run_until_complete, args=(serve(),), daemon=True)
    t.start()
    ready.wait(10)
    try:
        yield f"http://127.0.0.1:{box['port']}"
    finally:
        loop.call_soon_threadsafe(box["stop"].set)
        t.join(10)


def replay(url: str, trace: Path) -> RunResult:
    cfg = BenchConfig(
        url=url,
        trace=str(trace),
        block_size=SHARED,
        ignore_eos=True,
        progress=False,
        sample_interval=0.5,
    )
    return bench_and_diagnose(cfg)


def ttft_by_kind(result: RunResult) -> tuple[list[float], list[float]]:
    """TTFT from the actual send (queueing in the client excluded), shared / unshared;
    the first shared request has nothing to reuse yet and is left out."""
    shared, unshared = [], []
    for r in result.records:
        line = int(r.labels["line"])
        if r.ttft_from_sent is None or line == 1:
            continue
        (shared if line % 2 == 1 else unshared).append(r.ttft_from_sent)
    return shared, unshared


def summary(name: str, result: RunResult) -> list[str]:
    shared, unshared = ttft_by_kind(result)
    agg = next(iter(result.aggregates.values()))
    pc = agg.get("prefix_cache") or {}
    client = (pc.get("client") or {}).get("hit_rate")
    engine = (pc.get("engine") or {}).get("hit_rate")
    ps = agg.get("prefix_sharing") or {}
    p50s, p50u = float(np.median(shared)), float(np.median(unshared))
    verdict = next((v for v in result.diagnosis if v.id == "prefix_cache_miss"), None)
    return [
        name,
        f"{p50s * 1e3:.0f}",
        f"{p50u * 1e3:.0f}",
        f"{p50s / p50u:.2f}",
        f"{ps.get('intended', 0):.0%} / {ps.get('sent', 0):.0%}",
        "-" if client is None else f"{client:.0%}",
        "-" if engine is None else f"{engine:.0%}",
        verdict.summary if verdict else "no prefix_cache_miss verdict",
    ]
