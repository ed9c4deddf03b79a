"""Three gateway processes sharing limits, spend and breakers through a real Redis.

Each test starts its own ``redis-server`` (free port, temp dir, no persistence), fake
upstreams in their own processes and three ``infersight gateway`` processes from one
config file, and talks to them with the official openai client.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
import redis as redis_py
from replicas import Replicas, write_config

from infersight_testkit import FakeConfig, FakeOpenAI
from infersight_testkit.fake.process import FakeProcess
from infersight_testkit.redis_server import RedisServer
from support.waiting import until, until_blocking

pytestmark = [pytest.mark.needs("redis-server"), pytest.mark.slow, pytest.mark.timeout(240)]

MSG = [{"role": "user", "content": "hello there"}]
#: Dollars per million tokens for model "fake": one request costs a few thousandths.
PRICES = '[models."fake"]\ninput = 1000.0\noutput = 1000.0\n'


@pytest.fixture
def redis() -> Iterator[RedisServer]:
    with RedisServer() as rs:
        yield rs


@pytest.fixture
def fake() -> Iterator[FakeProcess]:
    with FakeOpenAI.subprocess(FakeConfig(tokens=4)) as srv:
        yield srv


def _client(url: str, key: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=url + "/v1", api_key=key, max_retries=0, timeout=30)


async def _burst(urls: list[str], key: str, n: int, model: str = "fake") -> Counter[int]:
    """``n`` concurrent chat requests spread round-robin over ``urls``: status counts."""
    clients = [_client(u, key) for u in urls]

    async def one(i: int) -> int:
        try:
            await clients[i % len(clients)].chat.completions.create(
                model=model, messages=MSG, max_tokens=4
            )  # type: ignore[arg-type]
        except openai.APIStatusError as e:
            return e.status_code
        return 200

    try:
        return Counter(await asyncio.gather(*(one(i) for i in range(n))))
    finally:
        for c in clients:
            await c.close()


def _fleet(
    tmp_path: Path,
    redis: RedisServer,
    upstreams: list[dict[str, Any]],
    keys: dict[str, dict[str, Any]],
    **shared: Any,
) -> Replicas:
    prices = tmp_path / "prices.toml"
    prices.write_text(PRICES)
    # A generous Redis timeout: on a loaded 2-core machine a slow answer must not look
    # like an outage (outages here are real: redis-server stopped).
    shared = {"timeout_ms": 3000, **shared}
    cfg = write_config(
        tmp_path / "gw.toml",
        redis_url=redis.url,
        upstreams=upstreams,
        keys=keys,
        prices=prices,
        shared=shared,
    )
    return Replicas(cfg, 3, tmp_path)


def test_request_limit_holds_across_three_replicas(
    tmp_path: Path, redis: RedisServer, fake: FakeProcess
) -> None:
    n = 12
    up = {"name": "a", "url": fake.base_url, "models": ["fake"], "concurrency": 64}
    with _fleet(
        tmp_path, redis, [up], {"sk-lim": {"name": "lim", "requests_per_minute": n}}
    ) as fleet:
        t0 = time.monotonic()
        got = asyncio.run(_burst(fleet.urls, "sk-lim", 60))
        elapsed = time.monotonic() - t0
        assert set(got) <= {200, 429}, got  # refused with 429, never a 5xx
        refill = int(elapsed * n / 60.0)  # the bucket refills n per minute meanwhile
        assert n <= got[200] <= n + 1 + refill, (got, elapsed)
        # Each replica answered its 20, and alone would have let n of them through:
        # 3n in all without sharing.
        answered = [fleet.metric(i, "infersight_gateway_requests_total") for i in range(3)]
        served = [
            fleet.metric(i, "infersight_gateway_requests_total", status="200") for i in range(3)
        ]
        assert answered == [20, 20, 20] and sum(served) == got[200], (answered, served)
        assert all(fleet.metric(i, "infersight_gateway_shared_up") == 1 for i in range(3))


def test_token_limit_budget_and_spend_are_the_fleets(
    tmp_path: Path, redis: RedisServer, fake: FakeProcess
) -> None:
    up = {"name": "a", "url": fake.base_url, "models": ["fake"]}
    keys = {
        "sk-tok": {"name": "tok", "tokens_per_minute": 5},  # one answer (>5 tokens) uses it up
        "sk-bud": {"name": "bud", "max_cost_usd": 0.000001},  # one answer spends it
        "sk-spend": {"name": "spender"},  # no limits: only its spend is totalled
    }
    with _fleet(tmp_path, redis, [up], keys) as fleet:
        a, b, c = fleet.urls

        store = redis_py.Redis.from_url(redis.url, decode_responses=True)

        def charged() -> bool:  # what Redis holds once every charge is written
            spend = {
                k: float(store.get(f"infersight:gateway:{{key:{k}}}:spend") or 0)
                for k in ("tok", "bud", "spender")
            }
            tokens = store.hget("infersight:gateway:{key:tok}:tpm", "l")
            return (
                tokens is not None
                and float(tokens) < 1
                and spend["bud"] > 0.000001
                and spend["spender"] == pytest.approx(sum(ledgers()), rel=1e-6)
            )

        def ledgers() -> list[float]:
            return [
                fleet.get(i, "/stats")["cost"]["by_key"].get("spender", {}).get("cost_usd", 0.0)
                for i in range(2)
            ]

        assert asyncio.run(_burst([a], "sk-tok", 1)) == {200: 1}
        assert asyncio.run(_burst([a], "sk-bud", 1)) == {200: 1}
        assert asyncio.run(_burst([a], "sk-spend", 1)) == {200: 1}
        assert asyncio.run(_burst([b], "sk-spend", 1)) == {200: 1}
        until_blocking(charged, "charges written")
        store.close()

        async def refused(url: str, key: str) -> openai.APIStatusError:
            async with _client(url, key) as client:
                with pytest.raises(openai.RateLimitError) as ei:
                    await client.chat.completions.create(model="fake", messages=MSG, max_tokens=4)  # type: ignore[arg-type]
            return ei.value

        for url in (b, c):  # neither served these keys: they know from Redis
            e = asyncio.run(refused(url, "sk-tok"))
            assert "token rate limit" in e.message and e.code == "rate_limit_exceeded"
            e = asyncio.run(refused(url, "sk-bud"))
            assert e.code == "insufficient_quota" and "spent its budget" in e.message
        per_replica = ledgers()
        assert all(x > 0 for x in per_replica)
        # Replica c served none of the spender's requests, yet knows the fleet's total.
        keys_c = fleet.get(2, "/stats")["keys"]
        assert keys_c["spender"]["spent_usd"] == pytest.approx(sum(per_replica), rel=1e-6)
        assert keys_c["bud"]["budget_usd"] == 0.000001
        assert fleet.metric(2, "infersight_gateway_key_spend_usd", key="spender") == pytest.approx(
            sum(per_replica), rel=1e-6
        )


def test_breaker_opened_by_one_replica_is_honoured_by_the_others(
    tmp_path: Path, redis: RedisServer, fake: FakeProcess
) -> None:
    with RedisServer() as closed:  # a port nothing listens on once it is stopped
        closed.stop()
        dead_url = f"http://127.0.0.1:{closed.port}"
    ups = [
        {
            "name": "dead",
            "url": dead_url,
            "models": ["m"],
            "max_attempts": 1,
            "breaker_failures": 2,
            "breaker_cooldown_s": 60,
        },
        {"name": "good", "url": fake.base_url, "models": ["fake"]},
    ]
    with _fleet(tmp_path, redis, ups, {}) as fleet:
        got = asyncio.run(_burst([fleet.urls[0]], "unused", 2, model="m"))
        assert got == {502: 2}, got
        assert fleet.get(0, "/stats")["upstreams"][0]["circuit"] == "open"

        def open_at(i: int) -> bool:
            return bool(fleet.get(i, "/stats")["upstreams"][0]["circuit"] == "open")

        # Opens are polled every 200 ms: replicas 1 and 2 learn it from replica 0 (their
        # own circuits never saw a failure: the dead upstream gets no call from them,
        # below), not from a timer of their own (a cooldown of 60 s).
        until_blocking(lambda: open_at(1), "replica 1 to learn the open")
        until_blocking(lambda: open_at(2), "replica 2 to learn the open")
        # Replicas 1 and 2 never call the dead upstream: they shed at once.
        got = asyncio.run(_burst(fleet.urls[1:], "unused", 4, model="m"))
        assert got == {503: 4}, got
        for i in (1, 2):
            assert fleet.metric(i, "infersight_gateway_upstream_calls_total", upstream="dead") == 0
            assert (
                fleet.metric(i, "infersight_gateway_shared_remote_opens_total", upstream="dead")
                == 1
            )
            assert "circuit opened by replica" in fleet.log(i)
        assert asyncio.run(_burst(fleet.urls, "unused", 3)) == {200: 3}  # others unaffected


def test_redis_stopped_mid_run_gives_no_5xx_and_sharing_resumes(
    tmp_path: Path, redis: RedisServer, fake: FakeProcess
) -> None:
    n = 9
    up = {"name": "a", "url": fake.base_url, "models": ["fake"], "concurrency": 64}
    keys = {
        "sk-load": {"name": "load", "requests_per_minute": 1_000_000},
        "sk-after": {"name": "after", "requests_per_minute": n},
    }
    with _fleet(tmp_path, redis, [up], keys, retry_s=0.5) as fleet:

        def state(i: int) -> str:
            return str(fleet.health(i)["shared"]["state"])

        async def load(stop: asyncio.Event, out: Counter[int]) -> Counter[int]:
            """Six workers over the three replicas until ``stop`` (at most 3000 requests),
            counting the answers in ``out`` as they come."""
            clients = [_client(u, "sk-load") for u in fleet.urls]

            async def worker(w: int) -> None:
                while not stop.is_set() and sum(out.values()) < 3000:
                    try:
                        await clients[w % 3].chat.completions.create(
                            model="fake", messages=MSG, max_tokens=4
                        )  # type: ignore[arg-type]
                        out[200] += 1
                    except openai.APIStatusError as e:
                        out[e.status_code] += 1

            try:
                await asyncio.gather(*(worker(w) for w in range(6)))
            finally:
                for c in clients:
                    await c.close()
            return out

        async def served(out: Counter[int], more: int, what: str) -> None:
            """Until ``more`` requests beyond those answered so far are answered."""
            want = sum(out.values()) + more
            await until(lambda: sum(out.values()) >= want, what, timeout=60)

        async def run() -> Counter[int]:
            stop = asyncio.Event()
            out: Counter[int] = Counter()
            task = asyncio.create_task(load(stop, out))
            try:
                await served(out, 20, "load with Redis up")
                redis.stop()
                for i in range(3):
                    await asyncio.to_thread(
                        until_blocking, lambda i=i: state(i) == "down", f"replica {i} down"
                    )
                await served(out, 20, "load with Redis down")
                redis.start()
                for i in range(3):
                    await asyncio.to_thread(
                        until_blocking, lambda i=i: state(i) == "up", f"replica {i} back"
                    )
                await served(out, 20, "load with Redis back")
            finally:
                stop.set()
            return await task

        got = asyncio.run(run())
        assert set(got) == {200} and got[200] > 20, got  # no 5xx, nothing refused
        for i in range(3):
            assert "shared state: redis at" in fleet.log(i) and "unreachable" in fleet.log(i)
            assert "reachable again" in fleet.log(i)
            assert fleet.metric(i, "infersight_gateway_shared_rejoins_total") == 1
            assert fleet.metric(i, "infersight_gateway_shared_up") == 1
        assert (
            sum(
                fleet.metric(i, "infersight_gateway_shared_fallbacks_total", decision="local")
                for i in range(3)
            )
            >= 1
        )
        # Sharing resumed: the fresh key's limit holds across the three again.
        t0 = time.monotonic()
        got = asyncio.run(_burst(fleet.urls, "sk-after", 40))
        refill = int((time.monotonic() - t0) * n / 60.0)
        assert set(got) <= {200, 429} and n <= got[200] <= n + 1 + refill, got
