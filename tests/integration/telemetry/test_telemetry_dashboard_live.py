"""Every query of the shipped Grafana dashboard, run through a real Prometheus's HTTP
API against each supported engine (the fake engine in vLLM V1, SGLang, TGI and
llama.cpp dialects, the real embedded llama.cpp engine, and the infersight gateway in
front of a fake), all scraped through ``infersight exporter`` (the gateway also
directly); GPU panels against the replayed NVML fixture.

Which panels an engine can fill is derived from the engine table (engines.toml, via
``dashboards.panel_engines``): a panel must show data for every engine that has its
signal, and nothing for one that does not (Grafana then shows its "no data" text).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from prom_helpers import DATA, Prometheus, has_finite

from infersight.core.engines import engine_specs
from infersight.gateway import Gateway, load_config
from infersight.telemetry import ExporterServer, ReplayBackend, build_recorder
from infersight.telemetry.dashboards import (
    dashboard_expressions,
    dashboard_panels,
    panel_engines,
    sample_names,
)
from infersight.testing import FakeConfig, FakeOpenAI
from realparts import free_port

pytestmark = [pytest.mark.needs("prometheus"), pytest.mark.engine, pytest.mark.timeout(420)]

CLI = [sys.executable, "-c", "from infersight.cli import main; main()"]
DIALECTS = ("vllm", "sglang", "tgi", "llamacpp")
#: What Grafana's $__rate_interval becomes here (4 scrape intervals and some margin).
RATE = "15s"
GATEWAY_MODEL = "gpt-4o-mini"
#: Bounds of the load loops (they also stop when the test does).
MAX_REQUESTS, MAX_SECONDS = 5000, 300.0


def _expr(expr: str, *, instance: str = ".*", source: str = ".*") -> str:
    return (
        expr.replace("$__rate_interval", RATE)
        .replace("$instance", instance)
        .replace("$source", source)
    )


async def _load(
    url: str,
    model: str,
    stop: asyncio.Event,
    *,
    key: str | None,
    fail_every: int = 0,
    concurrency: int = 3,
    stream: bool = False,
) -> None:
    """Chat requests until ``stop`` (bounded); every ``fail_every``-th one fails."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    deadline = time.monotonic() + MAX_SECONDS
    sent = 0

    async def worker(session: aiohttp.ClientSession, w: int) -> None:
        nonlocal sent
        while not stop.is_set() and sent < MAX_REQUESTS and time.monotonic() < deadline:
            sent += 1
            body = {
                "model": model,
                "max_tokens": 8,
                "temperature": 0,
                "stream": stream,
                "messages": [{"role": "user", "content": f"Count to {sent} ({w})."}],
            }
            extra = {}
            if fail_every and sent % fail_every == 0:
                # a fake engine answers 503; the gateway refuses the unknown model
                extra = {"X-Fake-Behavior": "503"}
                body["model"] = "no-such-model"
            try:
                async with session.post(
                    f"{url}/v1/chat/completions", json=body, headers=extra
                ) as r:
                    await r.read()
            except (aiohttp.ClientError, TimeoutError):
                await asyncio.sleep(0.2)

    timeout = aiohttp.ClientTimeout(total=60)
    async with aiohttp.ClientSession(headers=headers, timeout=timeout) as session:
        await asyncio.gather(*(worker(session, w) for w in range(concurrency)))


@contextlib.asynccontextmanager
async def _fakes() -> AsyncIterator[dict[str, str]]:
    """Base URLs: one fake engine per dialect, and a gateway in front of one more."""
    async with contextlib.AsyncExitStack() as stack:
        out = {}
        for d in DIALECTS:
            cfg = FakeConfig(
                metrics_dialect=d, slots=2, ttft=0.05, itl=0.01, tokens=8, kv_usage=0.4
            )
            out[d] = (await stack.enter_async_context(FakeOpenAI(cfg).running())).base_url
        up = await stack.enter_async_context(
            FakeOpenAI(FakeConfig(ttft=0.05, itl=0.01, tokens=8)).running()
        )
        gw_cfg = load_config(
            None,
            port=0,
            upstreams=[
                # a model of the price table, so the cost panel has dollars to show, and one
                # it does not price, which the cost panel names as such
                {
                    "name": "fake",
                    "url": up.base_url,
                    "models": [GATEWAY_MODEL, "unpriced-model"],
                    "concurrency": 2,
                },
            ],
        )
        out["gateway"] = (await stack.enter_async_context(Gateway(gw_cfg).running())).url
        yield out


def _cli_exporter(urls: list[str], port: int, key: str | None, pid: int) -> subprocess.Popen[str]:
    env = {**os.environ, "INFERSIGHT_TEST_ENGINE_KEY": key or ""}
    args = [
        "exporter",
        *urls,
        "--port",
        str(port),
        "--interval",
        "0.5",
        "--no-gpu",
        "--process",
        f"engine={pid}",
    ]
    if key:
        args += ["--api-key-env", "INFERSIGHT_TEST_ENGINE_KEY"]
    return subprocess.Popen([*CLI, *args], env=env, stderr=subprocess.PIPE, text=True)


def _engine_targets(panel: dict[str, Any]) -> list[str]:
    return [
        t["expr"]
        for t in panel.get("targets", [])
        if any(n.startswith("engine.") for n in sample_names(t["expr"]))
    ]


async def _check_engine_panels(
    prom: Prometheus, s: aiohttp.ClientSession, sources: dict[str, tuple[str, str]]
) -> dict[str, list[str]]:
    """For each source: the panels with data (asserting the derived table)."""
    filled: dict[str, list[str]] = {}
    panels = [p for p in dashboard_panels() if _engine_targets(p)]
    assert len(panels) >= 12
    for name, (engine, source) in sources.items():
        filled[name] = []
        for p in panels:
            exprs = [_expr(e, source=source) for e in _engine_targets(p)]
            if engine in panel_engines(p):
                # has the signal: data within the time load needs to move a rate
                results = await asyncio.gather(*(prom.query_once(s, e) for e in exprs))
                deadline = time.monotonic() + 60
                while not any(map(has_finite, results)) and time.monotonic() < deadline:
                    await asyncio.sleep(1.0)
                    results = await asyncio.gather(*(prom.query_once(s, e) for e in exprs))
                assert any(map(has_finite, results)), f"{p['title']!r} empty for {name}"
                filled[name].append(p["title"])
            else:
                for e in exprs:
                    r = await prom.query_once(s, e)
                    assert not has_finite(r), f"{p['title']!r} has data for {name}: {e} -> {r}"
    return filled


async def test_every_panel_has_data_where_the_engine_has_the_signal(
    engine: Any, prometheus_factory: Any
) -> None:
    stop = asyncio.Event()
    cli_port = free_port()
    gpu_tel = build_recorder(
        interval=0.5, gpu_backend=ReplayBackend(DATA / "nvml_replay_h100_a100.json")
    )
    gpu_exporter = ExporterServer(gpu_tel.recorder, port=0, gpus=gpu_tel.gpus)
    await gpu_exporter.start()
    proc: subprocess.Popen[str] | None = None
    try:
        async with _fakes() as fakes:
            urls = fakes | {"embedded": engine.base_url}
            proc = _cli_exporter(list(urls.values()), cli_port, engine.api_key, engine.pid)
            loads = [
                asyncio.create_task(
                    _load(
                        url,
                        GATEWAY_MODEL,
                        stop,
                        key=None,
                        stream=d == "gateway",
                        fail_every=4 if d in ("tgi", "gateway") else 0,
                    )
                )
                for d, url in fakes.items()
            ]
            loads.append(
                asyncio.create_task(
                    _load(
                        engine.base_url, engine.model_name, stop, key=engine.api_key, concurrency=2
                    )
                )
            )
            prom = prometheus_factory(
                {
                    # neither job is called "infersight": InfersightExporterDown must stay quiet
                    "gpu-telemetry": gpu_exporter.url + "/metrics",
                    "cpu-host": f"http://127.0.0.1:{cli_port}/metrics",
                    "llm-gateway": fakes["gateway"] + "/metrics",
                }
            )
            kind = {"embedded": "llamacpp", "gateway": "infersight"}
            sources = {name: (kind.get(name, name), f"{url}/metrics") for name, url in urls.items()}
            async with aiohttp.ClientSession() as s:
                for _, source in sources.values():
                    await prom.query(s, f'infersight_engine_up{{source="{source}"}} == 1')
                filled = await _check_engine_panels(prom, s, sources)
                await _check_gpu_and_host(prom, s, gpu_exporter, cli_port)
                # every query of the dashboard has data (the gateway's own too: Prometheus
                # scrapes it directly), but the engine ones nothing here exports (the
                # table above) and the GPU ones on the CPU host; the variables'
                # label_values() is Grafana's, served by the labels API
                no_signal = {
                    e
                    for p in dashboard_panels()
                    for e in _engine_targets(p)
                    if not panel_engines({"targets": [{"expr": e}]})
                }
                for e in dashboard_expressions():
                    m = re.fullmatch(r"label_values\((.+), *(\w+)\)", e)
                    if m is None:
                        if e in no_signal:
                            await prom.query_once(s, _expr(e))
                        else:
                            await prom.query(s, _expr(e), timeout=30)
                        continue
                    params = {"match[]": _expr(m.group(1))}
                    async with s.get(
                        f"{prom.url}/api/v1/label/{m.group(2)}/values", params=params
                    ) as r:
                        values = (await r.json())["data"]
                    want = {"instance": f"127.0.0.1:{cli_port}", "source": sources["tgi"][1]}
                    assert want[m.group(2)] in values, (e, values)
                alerts = await prom.query_once(s, 'ALERTS{alertname="InfersightExporterDown"}')
                assert alerts == []
            stop.set()
            await asyncio.gather(*loads)
    finally:
        stop.set()
        if proc is not None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        await gpu_exporter.stop()
    assert proc.returncode == 0
    assert proc.stderr is not None and "Traceback" not in proc.stderr.read()
    # the embedded engine fills exactly what llama.cpp's table entry promises
    assert filled["embedded"] == filled["llamacpp"]
    for name, titles in filled.items():
        print(f"{name}: {len(titles)} engine panels with data: {', '.join(titles)}")
    assert len(engine_specs()) >= 5


async def _check_gpu_and_host(
    prom: Prometheus, s: aiohttp.ClientSession, gpu_exporter: ExporterServer, cli_port: int
) -> None:
    gpu_inst = f"127.0.0.1:{gpu_exporter.port}"
    cpu_inst = f"127.0.0.1:{cli_port}"
    panels = dashboard_panels()
    gpu_panels = [
        p
        for p in panels
        if any(n.startswith("gpu.") for t in p.get("targets", []) for n in sample_names(t["expr"]))
    ]
    assert len(gpu_panels) == 6
    for p in gpu_panels:
        for t in p["targets"]:
            # the replayed H100 + A100: every GPU query has data (SM activity only on the
            # H100, where GPM exists) ...
            await prom.query(s, _expr(t["expr"], instance=gpu_inst), timeout=30, finite=True)
            # ... and on the CPU host none: the panel shows its "no GPU" text
            assert await prom.query_once(s, _expr(t["expr"], instance=cpu_inst)) == []
    stat = next(p for p in panels if p["title"] == "GPUs")
    r = await prom.query(s, _expr(stat["targets"][0]["expr"], instance=cpu_inst))
    assert float(r[0]["value"][1]) == 0.0  # mapped to "no GPU"
    r = await prom.query(s, _expr(stat["targets"][0]["expr"], instance=gpu_inst))
    assert float(r[0]["value"][1]) == 2.0
    for title in ("Host CPU", "Host memory"):
        p = next(p for p in panels if p["title"] == title)
        for t in p["targets"]:  # host totals and the watched engine process
            await prom.query(s, _expr(t["expr"], instance=cpu_inst), timeout=30, finite=True)
