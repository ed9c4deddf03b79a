"""The fake server's prefill time, KV-limited admission and injected errors (the
knobs behind ``infersight_testkit.truth_scenarios``), over 127.0.0.1."""

from __future__ import annotations

import asyncio
import math
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

import aiohttp
import orjson
import pytest

from infersight.telemetry.promtext import parse_metrics
from infersight_testkit import Behavior, FakeConfig, FakeOpenAI
from support.waiting import until

pytestmark = pytest.mark.timeout(60)


def _body(words: int, max_tokens: int = 1) -> dict[str, Any]:
    return {
        "model": "fake",
        "prompt": " ".join(["w"] * words),
        "max_tokens": max_tokens,
        "stream": True,
    }


async def _first_token(session: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> float:
    """Seconds from sending to the first content chunk."""
    t0 = time.monotonic()
    async with session.post(url + "/v1/completions", json=body) as r:
        assert r.status == 200
        async for line in r.content:
            if line.startswith(b"data: {"):
                return time.monotonic() - t0
    raise AssertionError("no content chunk")


async def _send(session: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> int:
    async with session.post(url + "/v1/completions", json=body) as r:
        await r.read()
        assert "Retry-After" not in r.headers
        return r.status


async def _until(cond: Callable[[], bool]) -> None:
    """Wait until the server's state satisfies ``cond``."""
    await until(cond, "the server to reach the expected state")


async def test_the_first_token_waits_for_the_prompt_prefill() -> None:
    cfg = FakeConfig(ttft=0.01, itl=0.0, prefill_per_token=0.002)
    async with FakeOpenAI(cfg).running() as srv, aiohttp.ClientSession() as session:
        short = await _first_token(session, srv.base_url, _body(5))
        long = await _first_token(session, srv.base_url, _body(200))
    # a sleep never ends early: the long prompt's first step is at least 0.41 s, its
    # 200 tokens' prefill on top of the 0.01 s TTFT the short one's 5 barely add to
    assert long >= 0.01 + 200 * 0.002
    assert short >= 0.01 + 5 * 0.002


async def test_prefill_is_paced_by_the_compute_knee() -> None:
    # knee 1: with two running, each first step (prefill included) takes twice as long
    cfg = FakeConfig(ttft=0.0, prefill_per_token=0.002, compute_knee=1, tokens=1)
    async with FakeOpenAI(cfg).running() as srv, aiohttp.ClientSession() as session:
        both = await asyncio.gather(
            *(_first_token(session, srv.base_url, _body(500)) for _ in range(2))
        )
    # the second starts while the first still prefills (1 s alone), at half speed
    assert max(both) >= 2 * 500 * 0.002 * 0.95


async def test_kv_capacity_admits_only_what_fits_while_slots_are_free() -> None:
    # each request reserves 20 prompt + 10 answer tokens: 3 of them fit in 100
    cfg = FakeConfig(
        ttft=0.3, itl=0.001, tokens=10, slots=8, kv_capacity=100, metrics_dialect="vllm"
    )
    srv = FakeOpenAI(cfg)
    async with srv.running(), aiohttp.ClientSession() as session:
        tasks = [asyncio.create_task(_send(session, srv.base_url, _body(20, 10))) for _ in range(7)]
        await _until(lambda: srv.pool.running + srv.pool.waiting == 7)
        async with session.get(srv.base_url + "/metrics") as r:
            series, _ = parse_metrics(await r.text())
        gauges = {s.name: s.value for s in series}
        assert srv.pool.running == 3 and srv.pool.reserved == 90
        assert gauges["vllm:num_requests_running"] == 3
        assert gauges["vllm:num_requests_waiting"] == 4
        assert gauges["vllm:kv_cache_usage_perc"] == pytest.approx(0.9)
        assert await asyncio.gather(*tasks) == [200] * 7
    assert srv.pool.peak_running == 3 and srv.pool.peak_reserved == 90
    assert srv.pool.reserved == 0 and srv.pool.running == 0


async def test_kv_admission_is_fifo_and_an_oversized_request_runs_alone() -> None:
    # the first request holds its 60 tokens until the test lets it go (its client
    # leaves), so the queue's state never depends on how fast this machine is
    cfg = FakeConfig(ttft=0.2, tokens=1, slots=8, kv_capacity=100, script=[Behavior(ttft=120)])
    srv = FakeOpenAI(cfg)
    async with srv.running(), aiohttp.ClientSession() as session:
        url = srv.base_url
        big1 = asyncio.create_task(_send(session, url, _body(59)))  # 60 tokens
        await _until(lambda: srv.pool.running == 1)
        big2 = asyncio.create_task(_send(session, url, _body(59)))
        await _until(lambda: srv.pool.waiting == 1)
        small = asyncio.create_task(_send(session, url, _body(9)))  # 10: fits, but FIFO
        await _until(lambda: srv.pool.waiting == 2)
        assert srv.pool.running == 1 and srv.pool.reserved == 60
        big1.cancel()  # its slot and KV come free when the server sees it go
        assert list(await asyncio.gather(big2, small)) == [200] * 2
        huge = await _send(session, url, _body(500))  # more than the capacity: alone
    assert huge == 200
    lines = sorted(srv.stats["timelines"])  # by arrival
    assert len(lines) == 3  # big2, small, huge: the first never finished
    assert [t[1] for t in lines] == sorted(t[1] for t in lines)  # admitted in order
    assert srv.pool.peak_reserved == 501


async def test_error_rate_answers_a_seeded_share_at_once() -> None:
    n, rate = 300, 0.2
    cfg = FakeConfig(tokens=1, slots=1, error_rate=rate, error_status=503, error_seed=11)
    srv = FakeOpenAI(cfg)
    async with srv.running(), aiohttp.ClientSession() as session:
        statuses = [await _send(session, srv.base_url, _body(3)) for _ in range(n)]
    errors = statuses.count(503)
    bound = 4 * math.sqrt(n * rate * (1 - rate))
    assert abs(errors - n * rate) < bound
    assert set(statuses) == {200, 503}
    assert srv.stats["injected_errors"] == errors
    # answered before the queue: only the others ever held a slot
    assert len(srv.stats["timelines"]) == n - errors
    # the same seed draws the same requests
    again = FakeOpenAI(cfg)
    async with again.running(), aiohttp.ClientSession() as session:
        assert [await _send(session, again.base_url, _body(3)) for _ in range(n)] == statuses


def test_cli_flags_for_prefill_kv_and_errors() -> None:
    cmd = [
        sys.executable,
        "-m",
        "infersight_testkit.fake.openai",
        "--port",
        "0",
        "--kv-capacity",
        "64",
        "--error-rate",
        "1",
        "--error-status",
        "500",
        "--prefill-per-token",
        "0.001",
        "--error-seed",
        "3",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().split()[-1]
        req = urllib.request.Request(
            url + "/v1/completions", data=orjson.dumps(_body(3)), method="POST"
        )
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(req, timeout=10)
        assert err.value.code == 500
        with urllib.request.urlopen(url + "/_fake/stats", timeout=10) as r:
            stats = orjson.loads(r.read())
        assert stats["kv_capacity"] == 64 and stats["injected_errors"] == 1
    finally:
        proc.terminate()
        proc.wait(10)
    bad = subprocess.run(
        [sys.executable, "-m", "infersight_testkit.fake.openai", "--error-rate", "2"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert bad.returncode != 0 and "--error-rate" in bad.stderr
