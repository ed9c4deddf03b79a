"""A real Prometheus scrapes the exporter and the embedded engine; alert rules are
checked and unit-tested with promtool; the dashboard names only exported metrics."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from collections.abc import AsyncIterator
from importlib import resources
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
from aiohttp import web

from infersight.gateway.metrics import GatewayMetrics
from infersight.telemetry import (
    EngineScraper,
    ExporterServer,
    GpuSampler,
    HostSampler,
    Recorder,
    ReplayBackend,
)
from infersight.telemetry.dashboards import (
    alert_expressions,
    dashboard_expressions,
    promql_metric_names,
)
from infersight.telemetry.exporter.names import EXPORTED
from support.waiting import until

PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"
FIX = Path(__file__).parents[2] / "unit" / "telemetry" / "fixtures"
DATA = Path(str(resources.files("infersight.data").joinpath("telemetry")))

needs_prometheus = pytest.mark.needs("prometheus")


# -- promtool ---------------------------------------------------------------------------
def _promtool(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PROMTOOL, *args], cwd=cwd, capture_output=True, text=True, timeout=60)


@pytest.mark.needs("promtool")
def test_promtool_check_rules(tmp_path: Path) -> None:
    r = _promtool(["check", "rules", str(DATA / "alerts.yml")], tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    n = len(alert_expressions())
    assert n >= 10 and f"SUCCESS: {n} rules found" in r.stdout


@pytest.mark.needs("promtool")
def test_promtool_test_rules_fire_on_synthetic_series(tmp_path: Path) -> None:
    shutil.copy(DATA / "alerts.yml", tmp_path / "alerts.yml")
    shutil.copy(DATA / "alerts_test.yml", tmp_path / "alerts_test.yml")
    r = _promtool(["test", "rules", "alerts_test.yml"], tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    rules = (tmp_path / "alerts.yml").read_text()
    # the tests can fail: each mutation below must make promtool notice
    mutations = {
        "GpuIdleWhileRequestsWait": ("< 0.30)", "< 0.10)"),
        # the job name hard-coded again: an exporter scraped as "gpu-telemetry" is missed
        "InfersightExporterDown": ("up == 0\n", 'up{job="infersight"} == 0\n'),
        # scope dropped: a vLLM with a queue-time histogram would fire it too
        "EngineRequestsQueuedContinuously": (
            "unless on (instance, source)",
            "or on (instance, source)",
        ),
    }
    for alert, (old, new) in mutations.items():
        assert old in rules, alert
        (tmp_path / "alerts.yml").write_text(rules.replace(old, new, 1))
        r = _promtool(["test", "rules", "alerts_test.yml"], tmp_path)
        assert r.returncode != 0 and alert in (r.stdout + r.stderr), alert


# -- a live exporter over every kind of source --------------------------------------------
def _grow(text: str, k: int) -> str:
    """Histogram series multiplied by k: the engine keeps observing the same mix."""
    out = []
    for line in text.splitlines():
        if not line.startswith("#") and any(x in line for x in ("_bucket", "_sum", "_count")):
            name, value = line.rsplit(" ", 1)
            line = f"{name} {float(value) * k}"
        out.append(line)
    return "\n".join(out) + "\n"


@pytest_asyncio.fixture(loop_scope="function")
async def fixture_engines() -> AsyncIterator[dict[str, str]]:
    """Real HTTP servers serving recorded vLLM and TGI /metrics texts whose histograms
    grow on every scrape (so interval percentiles exist)."""
    texts = {"vllm": (FIX / "vllm_v0_11.txt").read_text(), "tgi": (FIX / "tgi_3.txt").read_text()}
    hits = {n: 0 for n in texts}

    def handler(name: str) -> Any:
        async def handle(_r: web.Request) -> web.Response:
            hits[name] += 1
            return web.Response(text=_grow(texts[name], hits[name]))

        return handle

    app = web.Application()
    for name in texts:
        app.router.add_get(f"/{name}/metrics", handler(name))
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    port = runner.addresses[0][1]
    yield {n: f"http://127.0.0.1:{port}/{n}/metrics" for n in texts}
    await runner.cleanup()


@pytest_asyncio.fixture(loop_scope="function")
async def exporter(engine: Any, fixture_engines: dict[str, str]) -> AsyncIterator[ExporterServer]:
    rec = Recorder(
        [
            HostSampler({"engine": engine.pid}, per_cpu=False),
            GpuSampler(ReplayBackend(DATA / "nvml_replay_h100_a100.json")),
            EngineScraper(engine.base_url, api_key=engine.api_key),
            EngineScraper(fixture_engines["vllm"]),
            EngineScraper(fixture_engines["tgi"]),
        ],
        interval=0.5,
    )
    srv = ExporterServer(rec, port=0)
    await srv.start()
    yield srv
    await srv.stop()


@needs_prometheus
@pytest.mark.engine
async def test_real_prometheus_scrapes_exporter_and_engine(
    exporter: ExporterServer, engine: Any, prometheus_factory: Any
) -> None:
    prom = prometheus_factory(
        {
            "infersight": exporter.url + "/metrics",
            "engine": engine.base_url + "/metrics",
        }
    )
    _query = prom.query
    async with aiohttp.ClientSession() as s:
        up = await _query(s, 'up{job="infersight"}')
        assert up[0]["value"][1] == "1"
        power = await _query(s, 'infersight_gpu_power_limit_watts{gpu="0"}')
        assert float(power[0]["value"][1]) == 700.0  # 700000 mW replayed through NVML path
        slots = await _query(s, 'infersight_engine_slots{engine="llamacpp"}')
        assert float(slots[0]["value"][1]) == 8.0  # the live engine's parallel=8
        waiting = await _query(s, 'infersight_engine_requests_waiting{engine="vllm"}')
        assert float(waiting[0]["value"][1]) == 12.0
        # Prometheus scrapes the engine itself too
        direct = await _query(s, 'llamacpp:requests_processing{job="engine"}')
        assert float(direct[0]["value"][1]) >= 0.0
        # the shipped rules loaded and evaluate against real data (KV 0.9375 > 0.9)
        rules = await _query(s, 'ALERTS{alertname="KvCacheNearlyFull"}', timeout=30)
        assert rules[0]["metric"]["alertstate"] in ("pending", "firing")
        # /health says fresh
        async with s.get(exporter.url + "/health") as r:
            assert r.status == 200
            h = await r.json()
            assert h["status"] == "ok" and h["rounds"] >= 1


@pytest.mark.engine
async def test_dashboard_and_alerts_name_only_exported_metrics(exporter: ExporterServer) -> None:
    # GPM and interval percentiles need 2 rounds
    await until(lambda: exporter.recorder.rounds >= 3, "three exporter rounds")
    async with aiohttp.ClientSession() as s, s.get(exporter.url + "/metrics") as r:
        text = await r.text()
    exported = {
        line.split("{", 1)[0].split(" ", 1)[0]
        for line in text.splitlines()
        if line and not line.startswith("#")
    }
    # every name of the exporter's table (histograms with their three series)
    for forms in EXPORTED.values():
        for e in forms:
            sfx = ("_bucket", "_sum", "_count") if e.kind == "histogram" else ("",)
            exported |= {e.name + x for x in sfx}
    # the gateway's own registry (src/infersight/gateway/metrics.py)
    gateway: set[str] = set()
    for fam in GatewayMetrics().registry.collect():
        suffixes = {"histogram": ("_bucket", "_sum", "_count"), "counter": ("_total",)}
        gateway |= {fam.name + sfx for sfx in suffixes.get(fam.type, ("",))}
    doc = json.loads((DATA / "grafana_dashboard.json").read_text())
    exprs = dashboard_expressions(doc)
    assert len(exprs) >= 20
    used = set().union(*(promql_metric_names(e) for e in exprs + alert_expressions()))
    allowed = exported | gateway | {"up"}  # up is Prometheus' own
    assert used - allowed == set(), f"not exported by anything: {sorted(used - allowed)}"
    # and the panels the issue asks for are there
    titles = " | ".join(p["title"] for p in doc["panels"])
    for want in (
        "SM activity",
        "memory",
        "power",
        "Queue depth",
        "Queue delay",
        "TTFT",
        "ITL",
        "throughput",
        "KV",
        "Errors",
        "Cost",
    ):
        assert want.lower() in titles.lower(), want


@pytest.mark.engine
async def test_exporter_scrape_serves_the_latest_round(engine: Any) -> None:
    """A scrape reads the round the recorder already took; it never samples the engine
    itself (what keeps it fast however slow the engine is): with the recorder held
    after its first round, forty scrapes find that round and take none of their own."""
    held = asyncio.Event()  # never set: no round after the first

    async def hold(_seconds: float) -> None:
        await held.wait()

    rec = Recorder(
        [EngineScraper(engine.base_url, api_key=engine.api_key)], interval=0.5, sleep=hold
    )
    srv = ExporterServer(rec, port=0)
    await srv.start()
    try:
        async with aiohttp.ClientSession() as s:
            for _ in range(40):
                async with s.get(srv.url + "/metrics") as r:
                    assert r.status == 200
                    assert "\ninfersight_engine_up{" in await r.text()
        assert rec.rounds == 1
    finally:
        await srv.stop()
