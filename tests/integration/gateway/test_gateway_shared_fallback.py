"""One gateway and its shared state when Redis is away, hung, or back; the Lua limits
under concurrency; the redis client missing. In-process gateways, a real redis-server."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from gateway_stack import CHAT, Stack, StackFactory
from prometheus_client import CollectorRegistry

from infersight.core.errors import ConfigError
from infersight.gateway import hash_key
from infersight.gateway.config import KeyConfig
from infersight.gateway.shared import (
    RedisLink,
    SharedConfig,
    SharedLimits,
    SharedMetrics,
    redis_client,
)
from infersight_testkit import FakeConfig
from infersight_testkit.redis_server import RedisServer
from support.ports import closed_port
from support.waiting import until_awaited

KEY, FREE = "sk-shared-limited-0123", "sk-shared-free-4567"
AUTH, AUTH_FREE = {"Authorization": f"Bearer {KEY}"}, {"Authorization": f"Bearer {FREE}"}
KEYS = [
    {"name": "lim", "sha256": hash_key(KEY), "requests_per_minute": 2},
    {"name": "free", "sha256": hash_key(FREE)},
]
needs_redis = pytest.mark.needs("redis-server")


@pytest.fixture
def closed_url() -> Iterator[str]:
    """A redis:// URL on a port that refuses connections."""
    with closed_port() as port:
        yield f"redis://:hunter2-secret@127.0.0.1:{port}/0"


@pytest.fixture
def redis() -> Iterator[RedisServer]:
    with RedisServer() as rs:
        yield rs


async def _health(s: Stack) -> dict[str, object]:
    async with s.session.get(s.url + "/health") as r:
        assert r.status == 200  # an unreachable Redis never makes the gateway unhealthy
        doc: dict[str, object] = await r.json()
        return doc


async def _shared_stats(s: Stack) -> dict[str, object]:
    auth = {"Authorization": f"Bearer {s.admin_key}"} if s.admin_key else None
    async with s.session.get(s.url + "/stats", headers=auth) as r:
        doc: dict[str, object] = (await r.json())["shared"]
        return doc


async def test_unreachable_redis_local_mode_serves_on_own_limits(
    make_stack: StackFactory, closed_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="infersight.gateway")
    shared = {"redis_url": closed_url, "retry_s": 30}
    async with make_stack([FakeConfig(tokens=1)], keys=KEYS, shared=shared) as s:
        s.admin_key = FREE  # /metrics and /stats need a key when keys are set
        statuses = [(await s.post("/v1/chat/completions", CHAT, AUTH))[0] for _ in range(3)]
        assert statuses == [200, 200, 429]  # this replica's own bucket: 2 per minute
        doc = await _health(s)
        sh = doc["shared"]
        assert isinstance(sh, dict) and sh["state"] == "down" and sh["mode"] == "local"
        assert any("unreachable" in w for w in doc["warnings"])  # type: ignore[attr-defined]
        assert "127.0.0.1" not in orjson.dumps(doc).decode()  # /health is public: no address
        assert await s.metric("infersight_gateway_shared_up") == 0
        assert await s.metric("infersight_gateway_shared_fallbacks_total", decision="local") == 3
        stats = await _shared_stats(s)
        assert "Connect" in str(stats["error"]) and str(stats["url"]).startswith(
            "redis://127.0.0.1:"
        )
        text = orjson.dumps(stats).decode() + caplog.text
    assert (
        "hunter2-secret" not in text
        and "redis://127.0.0.1:" in text
        and "@" not in str(stats["url"])
    )
    assert "unreachable at start" in caplog.text


async def test_unreachable_redis_reject_mode_refuses_limited_keys_only(
    make_stack: StackFactory, closed_url: str
) -> None:
    shared = {"redis_url": closed_url, "on_redis_error": "reject", "retry_s": 30}
    async with make_stack([FakeConfig(tokens=1)], keys=KEYS, shared=shared) as s:
        s.admin_key = FREE  # /metrics and /stats need a key when keys are set
        status, headers, raw = await s.post("/v1/chat/completions", CHAT, AUTH)
        err = orjson.loads(raw)["error"]
        assert status == 429 and err["code"] == "shared_limits_unavailable"
        assert headers["Retry-After"] == "30" and "hunter2" not in err["message"]
        assert (await s.post("/v1/chat/completions", CHAT, AUTH_FREE))[0] == 200
        sh = (await _health(s))["shared"]
        assert isinstance(sh, dict) and sh["mode"] == "reject"
        assert await s.metric("infersight_gateway_shared_fallbacks_total", decision="reject") == 1
        assert s.fakes[0].stats["requests"] == 1


@needs_redis
async def test_hung_redis_costs_a_request_at_most_the_timeout(
    make_stack: StackFactory, redis: RedisServer
) -> None:
    shared = {"redis_url": redis.url, "timeout_ms": 300, "retry_s": 30}
    async with make_stack([FakeConfig(tokens=1)], keys=KEYS, shared=shared) as s:
        s.admin_key = FREE  # /metrics and /stats need a key when keys are set
        assert (await s.post("/v1/chat/completions", CHAT, AUTH))[0] == 200
        assert redis.pid is not None
        os.kill(redis.pid, signal.SIGSTOP)  # accepts nothing, answers nothing
        errors = "infersight_gateway_shared_errors_total"
        try:
            # The first request's admission waits on Redis until the 300 ms timeout cuts
            # it (one error), then is decided locally.
            assert (await s.post("/v1/chat/completions", CHAT, AUTH))[0] == 200
            assert await s.metric(errors, op="admit") == 1
            sh = await _shared_stats(s)
            assert sh["state"] == "down" and sh["error"] == "no answer within 300 ms"
            # Down now: no request waits on Redis any more (no call, so no second
            # error); the local bucket is spent.
            assert (await s.post("/v1/chat/completions", CHAT, AUTH))[0] == 429
            assert await s.metric(errors, op="admit") == 1
        finally:
            os.kill(redis.pid, signal.SIGCONT)
        assert await s.metric("infersight_gateway_shared_fallbacks_total", decision="local") == 2


@needs_redis
async def test_spend_during_an_outage_is_added_when_redis_is_back(
    make_stack: StackFactory, redis: RedisServer, tmp_path: Path
) -> None:
    prices = tmp_path / "prices.toml"
    prices.write_text('[models."fake"]\ninput = 1000.0\noutput = 1000.0\n')
    shared = {"redis_url": redis.url, "retry_s": 0.2, "prefix": "t"}
    async with make_stack(
        [FakeConfig(tokens=3)], keys=KEYS, shared=shared, prices_file=str(prices)
    ) as s:
        s.admin_key = FREE  # /metrics and /stats need a key when keys are set
        redis.stop()
        assert (await s.post("/v1/chat/completions", CHAT, AUTH_FREE))[0] == 200
        assert (await s.post("/v1/chat/completions", CHAT, AUTH_FREE))[0] == 200
        spent = await s.metric("infersight_gateway_cost_usd_total", key="free")
        assert spent > 0

        async def shared(cond: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
            sh = (await _health(s))["shared"]
            assert isinstance(sh, dict)
            return sh if cond(sh) else {}

        # charges are written every 50 ms: they fail, and wait
        sh = await until_awaited(
            lambda: shared(lambda sh: sh["pending_spend_usd"] == pytest.approx(spent)),
            "the spend to wait for Redis",
        )
        assert sh["state"] == "down"
        redis.start()
        await until_awaited(
            lambda: shared(lambda sh: sh["state"] == "up" and not sh["pending_spend_usd"]),
            "the waiting spend to be written",
        )
        client = redis_client(SharedConfig(redis_url=redis.url))
        try:
            total = float(await client.get("t:{key:free}:spend") or 0)
        finally:
            await client.aclose()
        assert total == pytest.approx(spent, rel=1e-9)


@needs_redis
async def test_lua_limits_admit_exactly_the_limit_under_concurrency(redis: RedisServer) -> None:
    """Two replicas' worth of clients race 300 admissions for a 50/min key, pipelined."""
    cfg = SharedConfig(redis_url=redis.url, timeout_ms=5000)
    key = KeyConfig(name="race", sha256=hash_key("x"), requests_per_minute=50)
    regs = [CollectorRegistry() for _ in range(2)]
    links = [RedisLink(cfg, SharedMetrics(reg)) for reg in regs]
    try:
        for link in links:
            assert await link.connect()
        # A Redis that forgot the scripts (restarted, SCRIPT FLUSH) gets them again.
        await links[0].client.script_flush()
        limits = [SharedLimits(link, cfg) for link in links]
        t0 = time.monotonic()
        admissions = await asyncio.gather(*(limits[i % 2].admit(key) for i in range(300)))
        elapsed = time.monotonic() - t0
    finally:
        for link in links:
            await link.close()
    assert all(v is not None for v in admissions)
    ok = sum(1 for v in admissions if v is not None and v.refused is None)
    assert 50 <= ok <= 50 + int(elapsed * 50 / 60.0) + 1, (ok, elapsed)
    waits = [v.wait for v in admissions if v is not None and v.refused == "requests"]
    assert waits and all(0 < w <= 1.2 for w in waits)  # 50/min: one more every 1.2 s
    for reg in regs:  # one round trip per admission, each timed
        calls = reg.get_sample_value(
            "infersight_gateway_shared_call_seconds_count", {"op": "admit"}
        )
        assert calls == 150, calls


@needs_redis
async def test_charges_of_several_keys_go_in_one_pipeline_that_reloads_scripts(
    redis: RedisServer,
) -> None:
    cfg = SharedConfig(redis_url=redis.url, timeout_ms=5000)
    reg = CollectorRegistry()
    link = RedisLink(cfg, SharedMetrics(reg))
    keys = [KeyConfig(name=f"pipe{i}", sha256="0" * 64, tokens_per_minute=1e6) for i in range(5)]
    spent: dict[str, float] = {}
    try:
        assert await link.connect()
        limits = SharedLimits(link, cfg)
        await link.client.script_flush()  # a Redis that forgot the scripts
        for i, k in enumerate(keys):
            limits.charge(
                k,
                10 * (i + 1),
                0.5 * (i + 1),
                lambda total, name=k.name: spent.__setitem__(name, total),
            )
        await limits.close()  # writes what is owed
        assert spent == {f"pipe{i}": 0.5 * (i + 1) for i in range(5)}
        assert (
            reg.get_sample_value("infersight_gateway_shared_call_seconds_count", {"op": "charge"})
            == 1
        )
        assert link.up
    finally:
        await link.close()


def test_missing_redis_client_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("redis", "redis.asyncio", "redis.asyncio.retry", "redis.backoff"):
        monkeypatch.setitem(sys.modules, name, None)  # as if not installed
    with pytest.raises(ConfigError) as ei:
        redis_client(SharedConfig(redis_url="redis://127.0.0.1:1/0"))
    assert "pip install 'infersight[redis]'" in str(ei.value)


def test_cli_without_redis_client_says_how_to_install(tmp_path: Path) -> None:
    cfg = tmp_path / "gw.toml"
    cfg.write_text(
        '[[upstreams]]\nname = "a"\nurl = "http://127.0.0.1:9"\nmodels = ["m"]\n'
        '[shared]\nredis_url = "redis://:pw-not-shown@127.0.0.1:9/0"\n'
    )
    code = "import sys; sys.modules['redis'] = None; from infersight.cli import main; main()"
    r = subprocess.run(
        [sys.executable, "-c", code, "gateway", "-c", str(cfg), "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("error: ") and "Traceback" not in r.stderr
    assert "pip install 'infersight[redis]'" in r.stderr and "pw-not-shown" not in r.stderr


def test_shared_config_errors_are_one_line_and_hide_passwords(tmp_path: Path) -> None:
    from infersight.gateway import load_config

    f = tmp_path / "gw.toml"
    f.write_text('[shared]\nredis_url = "http://:pw-hidden@h:1"\n')
    with pytest.raises(ConfigError) as ei:
        load_config(f)
    assert "shared.redis_url" in str(ei.value) and "pw-hidden" not in str(ei.value)
    f.write_text('[shared]\non_redis_error = "panic"\n')
    with pytest.raises(ConfigError):
        load_config(f)
    os.environ["INFERSIGHT_GATEWAY_REDIS_URL"] = "redis://127.0.0.1:7/0"
    try:
        f.write_text('[shared]\non_redis_error = "reject"\n')
        cfg = load_config(f)
    finally:
        del os.environ["INFERSIGHT_GATEWAY_REDIS_URL"]
    assert cfg.shared.redis_url == "redis://127.0.0.1:7/0"
    assert cfg.shared.on_redis_error == "reject"
    assert "redis://" not in repr(cfg)


@needs_redis
async def test_one_connection_serves_many_calls_and_an_error_reply_goes_local(
    redis: RedisServer,
) -> None:
    # max_connections=1: 200 concurrent admissions wait for the one connection; Redis
    # has forgotten the script, so the first call loads it again. Every call gets its
    # own answer; an error reply means "Redis unavailable" (go local).
    cfg = SharedConfig(redis_url=redis.url, timeout_ms=5000, max_connections=1)
    link = RedisLink(cfg, SharedMetrics(CollectorRegistry()))
    try:
        assert await link.connect()
        echo = link.client.register_script("return ARGV[1] .. KEYS[1]")
        fails = link.client.register_script("return redis.error_reply('no')")
        await link.client.script_flush()
        replies = await asyncio.gather(
            *(
                link.call("echo", lambda r, i=i: echo(keys=[f"k{i}"], args=[f"v{i}"], client=r))
                for i in range(200)
            )
        )
        assert replies == [f"v{i}k{i}" for i in range(200)]
        assert await link.call("fails", lambda r: fails(keys=["k"], args=[], client=r)) is None
        assert not link.up
        assert await link.connect()
        assert (
            await link.call("echo", lambda r: echo(keys=["after"], args=["ok-"], client=r))
            == "ok-after"
        )
    finally:
        await link.close()


@needs_redis
async def test_calls_reconnect_after_redis_restarts() -> None:
    # A connection idle across a Redis restart is dead: its call fails once (go
    # local), and after rejoining calls answer (the forgotten script loaded again).
    with RedisServer() as rs:
        cfg = SharedConfig(redis_url=rs.url, timeout_ms=2000)
        link = RedisLink(cfg, SharedMetrics(CollectorRegistry()))
        echo = link.client.register_script("return ARGV[1]")

        async def call(v: str) -> object:
            return await link.call("echo", lambda r: echo(keys=["k"], args=[v], client=r))

        try:
            assert await link.connect()
            assert await call("one") == "one"
            rs.stop()
            rs.start()
            assert await call("two") is None  # the stale connection: Redis "unavailable"
            assert not link.up
            assert await link.connect()
            assert await call("three") == "three"
        finally:
            await link.close()
