"""The fake server's engine model: N slots, a FIFO queue, engine-dialect /metrics."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import urllib.request
from typing import Any

import aiohttp
import orjson
import pytest

from infersight.telemetry.promtext import parse_metrics
from infersight_testkit import FakeConfig, FakeOpenAI
from support.waiting import until

pytestmark = pytest.mark.timeout(60)

_BODY = {"model": "fake", "prompt": "hello", "max_tokens": 1, "stream": True}


async def _one(session: aiohttp.ClientSession, url: str) -> None:
    async with session.post(url + "/v1/completions", json=_BODY) as r:
        assert r.status == 200
        await r.read()


def _gauges(text: str) -> dict[str, float]:
    series, _ = parse_metrics(text)
    return {s.name: s.value for s in series}


async def test_slots_queue_fifo_and_vllm_metrics() -> None:
    # 2 slots, 0.3 s per request, 6 at once: waits are 0, 0, 0.3, 0.3, 0.6, 0.6.
    cfg = FakeConfig(ttft=0.3, tokens=1, slots=2, metrics_dialect="vllm", kv_usage=0.05)
    async with FakeOpenAI(cfg).running() as srv, aiohttp.ClientSession() as session:
        tasks = [asyncio.create_task(_one(session, srv.base_url)) for _ in range(6)]
        await until(lambda: srv.pool.running + srv.pool.waiting == 6, "all six to arrive")
        async with session.get(srv.base_url + "/metrics") as r:
            mid = _gauges(await r.text())
        await asyncio.gather(*tasks)
        async with session.get(srv.base_url + "/metrics") as r:
            text = await r.text()
        async with session.get(srv.base_url + "/_fake/stats") as r:
            http_stats = orjson.loads(await r.read())
    assert mid["vllm:num_requests_running"] == 2
    assert mid["vllm:num_requests_waiting"] == 4
    assert mid["vllm:kv_cache_usage_perc"] == pytest.approx(0.05)
    waits = sorted(srv.stats["queue_waits"])
    assert len(waits) == 6
    for got, want in zip(waits, [0, 0, 0.3, 0.3, 0.6, 0.6], strict=True):
        assert got == pytest.approx(want, abs=0.12)
    lines = srv.stats["timelines"]
    # FIFO: slots are granted in arrival order.
    by_arrival = sorted(lines, key=lambda t: t[0])
    assert [t[1] for t in by_arrival] == sorted(t[1] for t in lines)
    assert http_stats["queue_waits"] == srv.stats["queue_waits"]
    assert http_stats["slots"] == 2 and http_stats["running"] == 0
    series, hists = parse_metrics(text)
    names = {s.name for s in series}
    assert {"vllm:num_preemptions_total", "vllm:generation_tokens_total"} <= names
    success = {
        s.labels["finished_reason"]: s.value for s in series if s.family == "vllm:request_success"
    }
    assert success["length"] == 6
    queue = next(h for h in hists if h.family == "vllm:request_queue_time_seconds")
    assert queue.count == 6
    assert queue.sum == pytest.approx(sum(waits), abs=0.05)
    assert queue.labels == {"model_name": "fake", "engine": "0"}
    ttft = next(h for h in hists if h.family == "vllm:time_to_first_token_seconds")
    assert ttft.sum == pytest.approx(sum(waits) + 6 * 0.3, abs=0.2)


async def test_kv_full_and_no_metrics_without_dialect() -> None:
    cfg = FakeConfig(ttft=0.3, tokens=1, slots=4, metrics_dialect="vllm", kv_per_running=0.25)
    async with FakeOpenAI(cfg).running() as srv, aiohttp.ClientSession() as session:
        tasks = [asyncio.create_task(_one(session, srv.base_url)) for _ in range(5)]
        await until(lambda: srv.pool.running + srv.pool.waiting == 5, "all five to arrive")
        async with session.get(srv.base_url + "/metrics") as r:
            mid = _gauges(await r.text())
        await asyncio.gather(*tasks)
    assert mid["vllm:kv_cache_usage_perc"] == pytest.approx(1.0)
    assert mid["vllm:num_requests_waiting"] == 1
    async with (
        FakeOpenAI(FakeConfig()).running() as srv,
        aiohttp.ClientSession() as session,
        session.get(srv.base_url + "/metrics") as r,
    ):
        assert r.status == 404


def _get(url: str | urllib.request.Request) -> Any:
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read()


def test_cli_slots_and_llamacpp_dialect() -> None:
    cmd = [
        sys.executable,
        "-m",
        "infersight_testkit.fake.openai",
        "--port",
        "0",
        "--slots",
        "3",
        "--metrics-dialect",
        "llamacpp",
        "--ttft",
        "0.01",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().split()[-1]
        assert orjson.loads(_get(url + "/props"))["total_slots"] == 3
        req = urllib.request.Request(
            url + "/v1/completions", data=orjson.dumps({**_BODY, "stream": False}), method="POST"
        )
        assert b"choices" in _get(req)
        gauges = _gauges(_get(url + "/metrics").decode())
        assert gauges["llamacpp:requests_processing"] == 0
        assert gauges["llamacpp:requests_deferred"] == 0
        assert gauges["llamacpp:tokens_predicted_total"] == 1
        assert "llamacpp:n_decode_total" in gauges
        assert "llamacpp:kv_cache_usage_ratio" not in gauges
    finally:
        proc.terminate()
        proc.wait(10)
    bad = subprocess.run(
        [sys.executable, "-m", "infersight_testkit.fake.openai", "--metrics-dialect", "triton"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert bad.returncode != 0 and "invalid choice" in bad.stderr
