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
import re
import signal
import subprocess
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from prom_helpers import (
    DATA,
    Prometheus,
    check_engine_panels,
    cli_exporter,
    engine_targets,
    expr,
    load,
)

from infersight.core.engines import engine_specs
from infersight.core.listen import free_port
from infersight.gateway import Gateway, load_config
from infersight.telemetry import ExporterServer, ReplayBackend, build_recorder
from infersight.telemetry.dashboards import (
    dashboard_expressions,
    dashboard_panels,
    panel_engines,
    sample_names,
)
from infersight_testkit import FakeConfig, FakeOpenAI

pytestmark = [pytest.mark.needs("prometheus"), pytest.mark.engine, pytest.mark.timeout(420)]

DIALECTS = ("vllm", "sglang", "tgi", "llamacpp")
GATEWAY_MODEL = "gpt-4o-mini"


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
            proc = cli_exporter(list(urls.values()), cli_port, engine.api_key, engine.pid)
            loads = [
                asyncio.create_task(
                    load(
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
                    load(
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
                filled = await check_engine_panels(prom, s, sources)
                await _check_gpu_and_host(prom, s, gpu_exporter, cli_port)
                # every query of the dashboard has data (the gateway's own too: Prometheus
                # scrapes it directly), but the engine ones nothing here exports (the
                # table above) and the GPU ones on the CPU host; the variables'
                # label_values() is Grafana's, served by the labels API
                no_signal = {
                    e
                    for p in dashboard_panels()
                    for e in engine_targets(p)
                    if not panel_engines({"targets": [{"expr": e}]})
                }
                for e in dashboard_expressions():
                    m = re.fullmatch(r"label_values\((.+), *(\w+)\)", e)
                    if m is None:
                        if e in no_signal:
                            await prom.query_once(s, expr(e))
                        else:
                            await prom.query(s, expr(e), timeout=30)
                        continue
                    params = {"match[]": expr(m.group(1))}
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
            await prom.query(s, expr(t["expr"], instance=gpu_inst), timeout=30, finite=True)
            # ... and on the CPU host none: the panel shows its "no GPU" text
            assert await prom.query_once(s, expr(t["expr"], instance=cpu_inst)) == []
    stat = next(p for p in panels if p["title"] == "GPUs")
    r = await prom.query(s, expr(stat["targets"][0]["expr"], instance=cpu_inst))
    assert float(r[0]["value"][1]) == 0.0  # mapped to "no GPU"
    r = await prom.query(s, expr(stat["targets"][0]["expr"], instance=gpu_inst))
    assert float(r[0]["value"][1]) == 2.0
    for title in ("Host CPU", "Host memory"):
        p = next(p for p in panels if p["title"] == title)
        for t in p["targets"]:  # host totals and the watched engine process
            await prom.query(s, expr(t["expr"], instance=cpu_inst), timeout=30, finite=True)
