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
import psutil
import pytest
import pytest_asyncio
from aiohttp import web

from infersight.core.errors import ConfigError
from infersight.core.records import RunResult, Sample
from infersight.telemetry import EngineScraper, HostSampler, Recorder, metrics_url, read_samples
from support.waiting import until

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

    props_ok = True

    async def props(self, _req: web.Request) -> web.Response:
        if not self.props_ok:  # e.g. an older llama.cpp without /props
            return web.json_response({"error": "not found"}, status=404)
        return web.json_response({"total_slots": 6})

    async def slots(self, _req: web.Request) -> web.Response:
        return web.json_response([{"id": i, "is_processing": False} for i in range(5)])


@pytest_asyncio.fixture(loop_scope="function")
async def metrics_server() -> AsyncIterator[tuple[str, _Metrics]]:
    m = _Metrics((FIX / "llamacpp_b4000.txt").read_text())
    app = web.Application()
    app.router.add_get("/metrics", m.handle)
    app.router.add_get("/props", m.props)
    app.router.add_get("/slots", m.slots)
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
    t0 = time.monotonic()
    out = await sc.sample()
    around = time.monotonic() - t0
    await sc.close()
    vals = {s.name: s.value for s in out}
    assert sc.engine == "llamacpp"
    assert vals["engine.up"] == 1.0
    assert vals["engine.requests_running"] == 4
    assert vals["engine.requests_waiting"] == 3
    assert vals["engine.slots"] == 6  # from /props total_slots
    took = vals["engine.scrape_duration_seconds"]
    # the scrape's own time, within the call's: a relation, no guessed bound
    assert took is not None and 0 <= took <= around
    assert all(s.labels["source"] == url + "/metrics" for s in out)
    _m.props_ok = False
    sc2 = EngineScraper(url)
    vals2 = {s.name: s.value for s in await sc2.sample()}
    await sc2.close()
    assert vals2["engine.slots"] == 5  # counted from /slots
    forced = EngineScraper(url, slots=3)
    vals3 = {s.name: s.value for s in await forced.sample()}
    await forced.close()
    assert vals3["engine.slots"] == 3  # the caller knows best


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


async def _until_it_ran(pid: int, cpu_s: float = 0.2) -> None:
    """Wait until ``pid`` has had ``cpu_s`` of CPU since now: the samplers' shares are
    taken over however long that takes on this box, never over a guessed sleep."""

    def used() -> float:
        t = psutil.Process(pid).cpu_times()
        return float(t.user + t.system)

    start = used()
    await until(lambda: used() >= start + cpu_s, f"process {pid} to run {cpu_s} s")


async def test_host_sampler_sees_a_busy_child_process() -> None:
    busy = _spawn("while True: pass")
    try:
        idle = _spawn("import time; time.sleep(30)")
        hs = HostSampler({"busy": busy.pid, "self": os.getpid(), "idle": idle.pid})
        await _until_it_ran(busy.pid)
        out = await hs.sample()
        idle.kill()
        idle.wait()
    finally:
        busy.kill()
        busy.wait()
    cpu = {s.labels["name"]: s.value for s in out if s.name == "process.cpu_percent"}
    rss = {s.labels["name"]: s.value for s in out if s.name == "process.rss_bytes"}
    # a spinning process gets CPU even on a loaded box (relative check: the share a
    # busy process gets on a box with load 15 on 2 cores is only ~13% of a core)
    assert cpu["busy"] is not None and cpu["idle"] is not None
    assert cpu["busy"] > 2.0 and cpu["busy"] > 5 * cpu["idle"]
    assert rss["self"] is not None and rss["self"] > 10e6
    cores = [s for s in out if s.name == "host.cpu_percent" and s.labels["cpu"] != "all"]
    assert len(cores) == os.cpu_count()
    assert all(s.value is not None and 0.0 <= s.value <= 100.0 for s in cores)
    names = {s.name for s in out}
    assert {
        "host.memory_used_bytes",
        "host.memory_total_bytes",
        "host.net_rx_bytes_total",
        "host.net_tx_bytes_total",
    } <= names
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
    now = [0.0]  # the recorder's clock: its sleeps advance it, the wall clock is not read

    async def sleep(seconds: float) -> None:
        now[0] += seconds
        await asyncio.sleep(0)  # a yield, so that the servers and the test run

    rec = Recorder(
        [HostSampler(per_cpu=False), EngineScraper(url), _Boom()],
        interval=0.1,
        capacity=50,
        record=path,
        clock=lambda: now[0],
        sleep=sleep,
    )
    seen: list[int] = []
    rec.add_listener(lambda r: seen.append(len(r)))
    async with rec:
        await until(lambda: rec.rounds >= 5, "five rounds")
    assert not rec.running
    # one round per interval of its clock at most (first round immediately): no burst
    assert 5 <= rec.rounds <= round(now[0] / 0.1) + 1 and rec.dropped == 0
    assert m.hits >= 5
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
        await _until_it_ran(child_pid)
        out_both = await both.sample()
        out_alone = await alone.sample()
    finally:
        for p in psutil.Process(parent.pid).children(recursive=True):
            p.kill()
        parent.kill()
        parent.wait()
    cpu_both = {s.labels["name"]: s.value for s in out_both if s.name == "process.cpu_percent"}
    cpu_alone = {s.labels["name"]: s.value for s in out_alone if s.name == "process.cpu_percent"}
    child, p_both, p_alone = cpu_both["child"], cpu_both["parent"], cpu_alone["parent"]
    assert child is not None and p_both is not None and p_alone is not None
    assert child > 2.0
    assert p_both < child / 3  # the sleeping parent only
    assert p_alone > child / 2  # the spinning child included
