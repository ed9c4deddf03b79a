"""Load for `gateway_overhead.py`: open loop at a fixed rate, closed loop at capacity,
and the CPU each serving process and the rest of the machine used meanwhile."""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass, field

import aiohttp
import numpy as np
import orjson
import psutil

from _gateway_targets import Target

PAYLOAD = {"model": "fake", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 16}
CHAT = "/v1/chat/completions"


@dataclass
class Sample:
    lat: list[float] = field(default_factory=list)
    errors: int = 0
    #: CPU seconds the serving process used while this sample's load ran.
    cpu_s: float = 0.0
    wall: float = 0.0

    def rps(self) -> float:
        return len(self.lat) / self.wall if self.wall else float("nan")

    def cpu_ms_per_req(self) -> float:
        n = len(self.lat) + self.errors
        return 1000.0 * self.cpu_s / n if n and self.cpu_s else float("nan")


def pct(v: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(v), q)) * 1000.0 if v else float("nan")


def cpu_of(pid: int | None) -> float:
    if pid is None:
        return 0.0
    try:
        t = psutil.Process(pid).cpu_times()
    except psutil.Error:
        return 0.0
    return float(t.user + t.system)


class Meter:
    """The CPU that processes other than this benchmark's used since it was made."""

    def __init__(self) -> None:
        self._t0 = time.monotonic()
        self._busy0 = self._busy()
        self._ours0 = self._ours()

    @staticmethod
    def _busy() -> float:
        t = psutil.cpu_times()
        return float(
            sum(t)
            - t.idle
            - getattr(t, "iowait", 0.0)
            - getattr(t, "guest", 0.0)
            - getattr(t, "guest_nice", 0.0)
        )

    @staticmethod
    def _ours() -> dict[int, float]:
        me = psutil.Process()
        out = {me.pid: cpu_of(me.pid)}
        for c in me.children(recursive=True):
            out[c.pid] = cpu_of(c.pid)
        return out

    def others_pct(self) -> float:
        wall = time.monotonic() - self._t0
        ours = sum(v - self._ours0.get(pid, 0.0) for pid, v in self._ours().items())
        others = max(0.0, self._busy() - self._busy0 - ours)
        return 100.0 * others / (wall * (os.cpu_count() or 1)) if wall > 0 else 0.0


async def one(
    session: aiohttp.ClientSession,
    t: Target,
    stream: bool,
    out: Sample,
    path: str = CHAT,
    body: bytes | None = None,
) -> None:
    data = body or orjson.dumps({**PAYLOAD, "model": t.model, "stream": stream})
    t0 = time.perf_counter()
    try:
        async with session.post(
            t.url + path, data=data, headers={"Content-Type": "application/json", **t.headers}
        ) as r:
            if stream:
                async for _ in r.content.iter_any():
                    pass
            else:
                await r.read()
            ok = r.status == 200
    except aiohttp.ClientError:
        ok = False
    if ok:
        out.lat.append(time.perf_counter() - t0)
    else:
        out.errors += 1


async def open_loop(
    session: aiohttp.ClientSession,
    t: Target,
    rate: float,
    seconds: float,
    stream: bool,
    out: Sample,
) -> None:
    """Send at fixed times (rate/s) regardless of answers; await all at the end."""
    loop = asyncio.get_running_loop()
    n = int(rate * seconds)
    start = loop.time() + 0.01
    tasks = []
    c0, w0 = cpu_of(t.pid), time.perf_counter()
    for i in range(n):
        delay = start + i / rate - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.ensure_future(one(session, t, stream, out)))
    await asyncio.gather(*tasks)
    out.cpu_s += cpu_of(t.pid) - c0
    out.wall += time.perf_counter() - w0


async def rate_compare(
    targets: list[Target], rate: float, stream: bool, seconds: float, blocks: int
) -> dict[str, Sample]:
    """Each target at ``rate`` for ``seconds`` in total, in ``blocks`` alternating blocks
    (ABBA: the order reverses every block)."""
    res = {t.name: Sample() for t in targets}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        for t in targets:  # warm the connection pools
            await open_loop(session, t, rate, 0.3, stream, Sample())
        for b in range(blocks):
            for t in targets if b % 2 == 0 else targets[::-1]:
                await open_loop(session, t, rate, seconds / blocks, stream, res[t.name])
    return res


async def closed_loop(
    t: Target,
    concurrency: int,
    seconds: float,
    stream: bool,
    path: str = CHAT,
    body: bytes | None = None,
) -> Sample:
    """``concurrency`` clients, each sending its next request when the last one ends."""
    out = Sample()
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        warm = Sample()
        await asyncio.gather(
            *(one(session, t, stream, warm, path, body) for _ in range(concurrency))
        )
        stop = time.perf_counter() + seconds

        async def worker() -> None:
            while time.perf_counter() < stop:
                await one(session, t, stream, out, path, body)

        c0, w0 = cpu_of(t.pid), time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        out.wall = time.perf_counter() - w0
        out.cpu_s = cpu_of(t.pid) - c0
    return out
