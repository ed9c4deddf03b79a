"""Spare grants against a real redis-server: admission without a round trip for keys far
from their limits, and never a request more than the shared bucket gave out."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import AsyncIterator, Iterator

import pytest
from prometheus_client import CollectorRegistry

from infersight.gateway import hash_key
from infersight.gateway.config import KeyConfig
from infersight.gateway.shared import RedisLink, SharedConfig, SharedLimits, SharedMetrics
from infersight.gateway.shared.spares import TTL_S
from support.redis_server import RedisServer

pytestmark = pytest.mark.needs("redis-server")


@pytest.fixture
def redis() -> Iterator[RedisServer]:
    with RedisServer() as rs:
        yield rs


def _key(name: str, rpm: float, **kw: float) -> KeyConfig:
    return KeyConfig(name=name, sha256=hash_key(name), requests_per_minute=rpm, **kw)


class Replica:
    def __init__(self, url: str, *, period: float = 60.0, timeout_ms: float = 5000) -> None:
        self.cfg = SharedConfig(redis_url=url, timeout_ms=timeout_ms)
        self.reg = CollectorRegistry()
        self.link = RedisLink(self.cfg, SharedMetrics(self.reg))
        self.limits = SharedLimits(self.link, self.cfg, period=period)

    def spares(self, outcome: str) -> float:
        v = self.reg.get_sample_value(
            "infersight_gateway_shared_spares_total", {"outcome": outcome}
        )
        return v or 0.0

    async def close(self) -> None:
        await self.limits.close()
        await self.link.close()


@contextlib.asynccontextmanager
async def two_replicas(redis: RedisServer) -> AsyncIterator[list[Replica]]:
    # A one-hour period: the buckets barely refill while a test runs, so counts are exact.
    reps = [Replica(redis.url, period=3600.0) for _ in range(2)]
    try:
        for r in reps:
            assert await r.link.connect()
        yield reps
    finally:
        for r in reps:
            await r.close()


def answered(r: Replica, key: KeyConfig) -> None:
    """What the gateway does once a request's answer is out: charge its usage."""
    r.limits.charge(key, 10, 0.0, lambda total: None)


async def _level(r: Replica, name: str) -> float:
    raw = await r.link.client.hget(f"{r.cfg.prefix}:{{key:{name}}}:rpm", "l")
    return float(raw)


async def test_far_key_is_admitted_without_a_round_trip(redis: RedisServer) -> None:
    async with two_replicas(redis) as replicas:
        r = replicas[0]
        key = _key("far", 1000)
        first = await r.limits.admit(key)  # no spare yet: a round trip
        assert first is not None and first.refused is None
        assert not r.limits.spares.at_hand("far")
        answered(r, key)  # the answer is out: the next spare is taken
        for _ in range(500):
            if r.limits.spares.at_hand("far"):
                break
            await asyncio.sleep(0.01)
        assert pytest.approx(await _level(r, "far"), abs=0.5) == 998  # one used, one spare
        assert redis.pid is not None
        os.kill(redis.pid, signal.SIGSTOP)  # Redis answers nothing now
        try:
            t0 = time.perf_counter()
            v = await r.limits.admit(key)
            took = time.perf_counter() - t0
        finally:
            os.kill(redis.pid, signal.SIGCONT)
        assert v is not None and v.refused is None
        assert took < 0.05, f"admission waited {took * 1000:.1f} ms with a spare at hand"
        assert r.spares("used") == 1 and r.link.up


async def test_unused_spare_goes_back_to_the_bucket(redis: RedisServer) -> None:
    async with two_replicas(redis) as replicas:
        r = replicas[0]
        key = _key("back", 1000)
        assert (v := await r.limits.admit(key)) is not None and v.refused is None
        answered(r, key)
        deadline = time.monotonic() + 5
        while not r.limits.spares.at_hand("back") and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        assert pytest.approx(await _level(r, "back"), abs=0.5) == 998
        await asyncio.sleep(TTL_S + 0.1)
        r.limits.spares.sweep()
        while await _level(r, "back") < 998.5 and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        assert pytest.approx(await _level(r, "back"), abs=0.5) == 999  # only the request
        assert r.spares("returned") == 1 and r.spares("used") == 0


async def test_near_the_limit_every_request_asks_redis(redis: RedisServer) -> None:
    # 12 per minute is below the margin: no spare is ever taken, as before spares.
    async with two_replicas(redis) as replicas:
        r = replicas[0]
        key = _key("small", 12)
        got = []
        for _ in range(14):
            got.append(await r.limits.admit(key))
            answered(r, key)
        await asyncio.sleep(0.05)
        assert [v is not None and v.refused is None for v in got] == [True] * 12 + [False] * 2
        assert r.spares("used") == 0 and not r.limits.spares.at_hand("small")


async def test_two_replicas_admit_exactly_the_limit_with_spares(redis: RedisServer) -> None:
    async with two_replicas(redis) as replicas:
        # 200 per hour-long period: far from the limit for most of the run (spares in play),
        # then near it (every request asks). Sequential requests alternate between two
        # replicas, with a pause that lets spares arrive; then a concurrent burst.
        key = _key("edge", 200)
        ok = 0
        for i in range(150):
            v = await replicas[i % 2].limits.admit(key)
            assert v is not None
            ok += v.refused is None
            answered(replicas[i % 2], key)
            await asyncio.sleep(0.002)
        used = sum(r.spares("used") for r in replicas)
        assert used >= 100, used  # most of them went without a round trip
        burst = await asyncio.gather(*(replicas[i % 2].limits.admit(key) for i in range(150)))
        ok += sum(1 for v in burst if v is not None and v.refused is None)
        assert ok == 200, ok  # never more than the bucket gave out, and nothing stranded
        assert all(v is not None for v in burst)
