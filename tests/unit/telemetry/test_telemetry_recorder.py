"""Recorder, host sampler and engine scraper against real local servers."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import pytest_asyncio
from aiohttp import web

from infersight.core.errors import ConfigError
from infersight.core.records import RunResult, Sample
from infersight.telemetry import EngineScraper, HostSampler, Recorder, metrics_url, read_samples

FIX = Path(__file__).parent / "fixtures"


class _Metrics:
    """A real aiohttp server serving a /metrics text that the test can change."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.status = 200
        self.hits = 0

    async def handle(self, _req: web.Request) -> web.Response:
        self.hits += 1
        return web.Response(text=self.text, status=self.status)

    async def props(self, _req: web.Request) -> web.Response:
        return web.json_response({"total_slots": 6})


@pytest_asyncio.fixture(loop_scope="function")
async def metrics_server() -> AsyncIterator[tuple[str, _Metrics]]:
    m = _Metrics((FIX / "llamacpp_b4000.txt").read_text())
    app = web.Application()
    app.router.add_get("/metrics", m.handle)
    app.router.add_get("/props", m.props)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    yield f"http://127.0.0.1:{port}", m
    await runner.cleanup()


def test_metrics_url() -> None:
    assert metrics_url("http://h:1") == "http://h:1/metrics"
    assert metrics_url("http://h:1/v1/") == "http://h:1/metrics"
    assert metrics_url("h:1") == "http://h:1/metrics"
    assert metrics_url("http://h:1/custom/metrics") == "http://h:1/custom/metrics"
    with pytest.raises(ConfigError):
        metrics_url("ftp://h/x")


async def test_scraper_normalises_and_reads_slot_limit(
    metrics_server: tuple[str, _Metrics],
) -> None:
    url, _m = metrics_server
    sc = EngineScraper(url)
    out = await sc.sample()
    await sc.close()
    vals = {s.name: s.value for s in out}
    assert sc.engine == "llamacpp"
    assert vals["engine.up"] == 1.0
    assert vals["engine.requests_running"] == 4
    assert vals["engine.requests_waiting"] == 3
    assert vals["engine.slots"] == 6  # from /props total_slots
    assert 0 <= (vals["engine.scrape_duration_seconds"] or 0) < 2
    assert all(s.labels["source"] == url + "/metrics" for s in out)


async def test_scraper_down_and_bad_text_report_up_zero(
    metrics_server: tuple[str, _Metrics],
) -> None:
    url, m = metrics_server
    sc = EngineScraper(url, timeout=1.0)
    m.status = 500
    out = await sc.sample()
    assert [(s.name, s.value) for s in out] == [("engine.up", 0.0)]
    assert sc.last_error and "500" in sc.last_error
    m.status, m.text = 200, 'x{le="1" 2\n'
    assert [(s.name, s.value) for s in await sc.sample()] == [("engine.up", 0.0)]
    await sc.close()
    nothing = EngineScraper("http://127.0.0.1:9", timeout=0.5)  # discard port: refused
    assert [(s.name, s.value) for s in await nothing.sample()] == [("engine.up", 0.0)]
    await nothing.close()


def _spawn(code: str, **kw: Any) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", code], text=True, **kw)


async def test_host_sampler_sees_a_busy_child_process() -> None:
    busy = _spawn("while True: pass")
    try:
        hs = HostSampler({"busy": busy.pid, "self": os.getpid()})
        await asyncio.sleep(0.6)
        out = await hs.sample()
    finally:
        busy.kill()
        busy.wait()
    cpu = {s.labels["name"]: s.value for s in out if s.name == "process.cpu_percent"}
    rss = {s.labels["name"]: s.value for s in out if s.name == "process.rss_bytes"}
    # a spinning process uses a large share of a core even on a loaded 2-core box
    assert cpu["busy"] is not None and cpu["busy"] > 20.0
    assert rss["self"] is not None and rss["self"] > 10e6
    cores = [s for s in out if s.name == "host.cpu_percent" and s.labels["cpu"] != "all"]
    assert len(cores) == os.cpu_count()
    assert all(0.0 <= (s.value or 0) <= 100.0 for s in cores)
    names = {s.name for s in out}
    assert {"host.memory_used_bytes", "host.memory_total_bytes", "host.net_rx_bytes_total",
            "host.net_tx_bytes_total"} <= names  # fmt: skip
    # the process has gone: its figures read as not available, no exception
    out2 = await hs.sample()
    assert {s.value for s in out2 if s.labels.get("name") == "busy"} == {None}


class _Boom:
    name = "boom"

    async def sample(self) -> list[Sample]:
        raise RuntimeError("sampler bug")

    async def close(self) -> None:
        return None


async def test_recorder_interval_ring_buffer_file_and_reader(
    metrics_server: tuple[str, _Metrics], tmp_path: Path
) -> None:
    url, m = metrics_server
    path = tmp_path / "rec" / "samples.jsonl"
    rec = Recorder([HostSampler(per_cpu=False), EngineScraper(url), _Boom()], interval=0.1,
                   capacity=50, record=path)  # fmt: skip
    seen: list[int] = []
    rec.add_listener(lambda r: seen.append(len(r)))
    t0 = time.monotonic()
    async with rec:
        await asyncio.sleep(0.75)
    elapsed = time.monotonic() - t0
    assert not rec.running
    # about one round per interval (first round immediately), never a burst
    assert 4 <= rec.rounds <= elapsed / 0.1 + 2
    assert m.hits >= 4
    assert len(seen) == rec.rounds
    # ring buffer keeps only the newest `capacity` samples
    buf = rec.samples()
    assert len(buf) == 50
    assert buf[-1].t >= buf[0].t
    # the file holds every sample, readable back
    samples, header = read_samples(path)
    assert header["infersight_samples"] == 1 and header["interval"] == 0.1
    assert len(samples) == sum(seen)
    assert samples[-len(rec.latest()) :] == rec.latest()
    # RunResult round trip keeps the samples
    res = rec.write_to(RunResult())
    back = RunResult.from_json_bytes(res.to_json_bytes())
    assert back.samples == buf


def test_reader_tolerates_truncated_last_line_only(tmp_path: Path) -> None:
    p = tmp_path / "s.jsonl"
    good = orjson.dumps({"t": 1.0, "name": "a", "value": None, "labels": {}})
    p.write_bytes(b'{"infersight_samples": 1}\n' + good + b"\n" + good[:10])
    samples, _ = read_samples(p)
    assert samples == [Sample(1.0, "a", None, {})]
    p.write_bytes(b'{"infersight_samples": 1}\n' + good[:10] + b"\n" + good + b"\n")
    with pytest.raises(ConfigError, match=":2:"):
        read_samples(p)
    p.write_bytes(good + b"\n")
    with pytest.raises(ConfigError, match="not an infersight samples recording"):
        read_samples(p)


def test_recorder_rejects_bad_interval() -> None:
    with pytest.raises(ConfigError):
        Recorder([], interval=0)


async def test_children_are_counted_once() -> None:
    """A parent watched with children=True does not count a child that is watched
    under its own name (bench: the load generator starts the engine as a child)."""
    code = (
        "import subprocess, sys, time\n"
        "c = subprocess.Popen([sys.executable, '-c', 'while True: pass'])\n"
        "print(c.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    parent = _spawn(code, stdout=subprocess.PIPE)
    try:
        assert parent.stdout is not None
        child_pid = int(parent.stdout.readline())
        both = HostSampler({"parent": parent.pid, "child": child_pid}, children=True)
        alone = HostSampler({"parent": parent.pid}, children=True)
        await both.sample()
        await alone.sample()
        await asyncio.sleep(0.8)
        out_both = await both.sample()
        out_alone = await alone.sample()
    finally:
        import psutil

        for p in psutil.Process(parent.pid).children(recursive=True):
            p.kill()
        parent.kill()
        parent.wait()
    cpu_both = {s.labels["name"]: s.value for s in out_both if s.name == "process.cpu_percent"}
    cpu_alone = {s.labels["name"]: s.value for s in out_alone if s.name == "process.cpu_percent"}
    assert cpu_both["child"] is not None and cpu_both["child"] > 20
    assert cpu_both["parent"] is not None and cpu_both["parent"] < 10  # the sleeper only
    assert cpu_alone["parent"] is not None and cpu_alone["parent"] > 20  # child included
