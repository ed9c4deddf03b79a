"""The Prometheus Collector over samples: stable names, types, N/A handling."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from infersight.core.records import Sample
from infersight.telemetry import TelemetryCollector, exported_name, render

E = {"engine": "vllm", "source": "http://h:8000/metrics"}


def _samples() -> list[Sample]:
    return [
        Sample(1.0, "gpu.utilization", 0.5, {"gpu": "0"}),
        Sample(1.0, "gpu.sm_activity", None, {"gpu": "0"}),  # N/A -> absent
        Sample(1.0, "engine.prompt_tokens_total", 1234.0, dict(E)),
        Sample(1.0, "engine.requests_waiting", 3.0, dict(E)),
        Sample(1.0, "engine.ttft_seconds", 12.5, {**E, "stat": "sum"}),
        Sample(1.0, "engine.ttft_seconds", 50.0, {**E, "stat": "count"}),
        Sample(1.0, "engine.ttft_seconds", 0.2, {**E, "stat": "p50"}),
        Sample(1.0, "engine.ttft_seconds", None, {**E, "stat": "p99"}),
        Sample(1.0, "raw.vllm:cache_config_info", 1.0, dict(E)),  # not re-exported
    ]


def test_render_types_names_and_values() -> None:
    text = render(_samples()).decode()
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    assert fams["infersight_gpu_utilization"].type == "gauge"
    assert fams["infersight_engine_prompt_tokens"].type == "counter"
    assert fams["infersight_engine_ttft_seconds"].type == "summary"
    assert "infersight_gpu_sm_activity" not in text
    assert "cache_config" not in text
    values = {
        (s.name, tuple(sorted(s.labels.items()))): s.value for f in fams.values() for s in f.samples
    }
    lab = tuple(sorted(E.items()))
    assert values[("infersight_engine_prompt_tokens_total", lab)] == 1234.0
    assert values[("infersight_engine_ttft_seconds_count", lab)] == 50.0
    assert values[("infersight_engine_ttft_seconds_sum", lab)] == 12.5
    q = tuple(sorted({**E, "quantile": "0.5"}.items()))
    assert values[("infersight_engine_ttft_seconds", q)] == 0.2
    assert not any(k[0] == "infersight_engine_ttft_seconds" and ("quantile", "0.99") in k[1]
                   for k in values)  # fmt: skip
    assert values[("infersight_exporter_up", ())] == 1.0


def test_collector_reads_the_source_at_scrape_time() -> None:
    box: list[Sample] = [Sample(1.0, "engine.requests_waiting", 1.0, dict(E))]
    reg = CollectorRegistry()
    reg.register(TelemetryCollector(lambda: box, rounds=lambda: 7, last_round=lambda: None))
    assert b"infersight_engine_requests_waiting{" in generate_latest(reg)
    assert reg.get_sample_value("infersight_exporter_rounds_total") == 7
    box[:] = [Sample(2.0, "engine.requests_waiting", 9.0, dict(E))]
    assert reg.get_sample_value("infersight_engine_requests_waiting", E) == 9.0


def test_exported_name() -> None:
    assert exported_name("gpu.utilization") == "infersight_gpu_utilization"
    assert exported_name("engine.kv_cache_usage") == "infersight_engine_kv_cache_usage"


async def test_scrape_never_waits_on_a_slow_engine() -> None:
    """The engine takes 0.8 s to answer /metrics; exporter scrapes stay fast because
    they render cached samples (the background recorder does the slow scrape)."""
    import asyncio
    import time
    from pathlib import Path

    import aiohttp
    from aiohttp import web

    from infersight.telemetry import EngineScraper, ExporterServer, Recorder

    text = (Path(__file__).parent / "fixtures" / "vllm_v0_11.txt").read_text()

    async def slow(_r: web.Request) -> web.Response:
        await asyncio.sleep(0.8)
        return web.Response(text=text)

    app = web.Application()
    app.router.add_get("/metrics", slow)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    srv = ExporterServer(Recorder([EngineScraper(url)], interval=0.2), port=0)
    try:
        await srv.start()
        lat = []
        async with aiohttp.ClientSession() as s:
            for _ in range(20):
                t0 = time.perf_counter()
                async with s.get(srv.url + "/metrics") as r:
                    body = await r.text()
                lat.append(time.perf_counter() - t0)
        assert 'infersight_engine_requests_waiting{engine="vllm"' in body
        lat.sort()
        assert lat[len(lat) // 2] < 0.05, lat
        assert lat[-1] < 0.5, lat  # never the engine's 0.8 s
    finally:
        await srv.stop()
        await runner.cleanup()
