"""The Prometheus Collector over samples: stable documented names, types, units,
histograms that stay histograms, N/A handling. Every test uses a fresh registry."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from infersight.core.engines import engine_specs
from infersight.core.records import Sample
from infersight.telemetry import (
    EngineScraper,
    ExporterServer,
    Recorder,
    TelemetryCollector,
    exported_name,
    histogram_quantile,
    render,
)
from infersight.telemetry.engine_metrics import Normalizer
from infersight.telemetry.exporter.docs import BEGIN, END, reference_markdown
from infersight.telemetry.exporter.names import EXPORTED, EXPORTER_OWN
from infersight.telemetry.promtext import merge_buckets, parse_metrics
from support.waiting import until

E = {"engine": "vllm", "source": "http://h:8000/metrics"}
FIX = Path(__file__).parent / "fixtures"
DOCS = Path(__file__).parents[3] / "docs" / "metrics.md"
TTFT = "vllm:time_to_first_token_seconds"


def _values(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
    }


def _samples() -> list[Sample]:
    return [
        Sample(1.0, "gpu.utilization", 0.5, {"gpu": "0"}),
        Sample(1.0, "gpu.sm_activity", None, {"gpu": "0"}),  # N/A -> absent
        Sample(1.0, "gpu.temperature_c", 61.0, {"gpu": "0"}),
        Sample(1.0, "gpu.sm_clock_mhz", 1980.0, {"gpu": "0"}),
        Sample(1.0, "host.cpu_percent", 40.0, {"cpu": "all"}),
        Sample(1.0, "host.cpu_percent", 70.0, {"cpu": "0"}),
        Sample(1.0, "host.cpu_percent", 10.0, {"cpu": "1"}),
        Sample(1.0, "host.net_rx_bytes_total", 5e6, {}),
        Sample(1.0, "engine.prompt_tokens_total", 1234.0, dict(E)),
        Sample(1.0, "engine.requests_waiting", 3.0, dict(E)),
        Sample(1.0, "engine.ttft_seconds", 12.5, {**E, "stat": "sum"}),
        Sample(1.0, "engine.ttft_seconds", 50.0, {**E, "stat": "count"}),
        Sample(1.0, "engine.ttft_seconds", 0.2, {**E, "stat": "p50"}),  # not exported
        Sample(1.0, "engine.ttft_seconds", 20.0, {**E, "stat": "bucket", "le": "0.25"}),
        Sample(1.0, "engine.ttft_seconds", 50.0, {**E, "stat": "bucket", "le": "+Inf"}),
        Sample(1.0, "raw.vllm:iteration_tokens_total_sum", 1.0, dict(E)),  # not re-exported
    ]


def test_render_types_names_units_and_values() -> None:
    text = render(_samples()).decode()
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    assert fams["infersight_gpu_utilization"].type == "gauge"
    assert fams["infersight_engine_prompt_tokens"].type == "counter"
    assert fams["infersight_engine_ttft_seconds"].type == "histogram"
    assert fams["infersight_host_network_receive_bytes"].type == "counter"
    assert "infersight_gpu_sm_activity" not in text
    assert "cache_config" not in text and "quantile" not in text
    v = _values(text)
    lab = tuple(sorted(E.items()))
    assert v[("infersight_engine_prompt_tokens_total", lab)] == 1234.0
    assert v[("infersight_engine_ttft_seconds_count", lab)] == 50.0
    assert v[("infersight_engine_ttft_seconds_sum", lab)] == 12.5
    le = tuple(sorted({**E, "le": "0.25"}.items()))
    assert v[("infersight_engine_ttft_seconds_bucket", le)] == 20.0
    # Prometheus units: Celsius and Hertz, not °C and MHz
    assert v[("infersight_gpu_temperature_celsius", (("gpu", "0"),))] == 61.0
    assert v[("infersight_gpu_sm_clock_hertz", (("gpu", "0"),))] == 1980e6
    # the host total is its own metric; the per-core one has only core indexes
    assert v[("infersight_host_cpu_percent", ())] == 40.0
    cores = {k[1] for k in v if k[0] == "infersight_host_cpu_core_percent"}
    assert cores == {(("cpu", "0"),), (("cpu", "1"),)}
    assert v[("infersight_exporter_up", ())] == 1.0
    assert v[("infersight_exporter_gpus", ())] == 1.0
    assert "mhz" not in text.lower() and "_temperature_c " not in text


def test_no_gpu_means_zero_gpus_and_no_gpu_series() -> None:
    text = render([Sample(1.0, "host.memory_used_bytes", 1.0, {})]).decode()
    assert _values(text)[("infersight_exporter_gpus", ())] == 0.0
    assert "infersight_gpu_" not in text


def test_histograms_stay_histograms_and_quantiles_add_up_across_instances() -> None:
    """Two engines' buckets exported, summed by le as PromQL does: the quantile equals
    the one of the merged engine histograms (what histogram_quantile across instances
    needs, and what a last-interval summary could never give)."""
    text = (FIX / "vllm_v0_11.txt").read_text()
    # a second replica that has seen a different mix: low buckets grew more
    other = "\n".join(
        f"{line.rsplit(' ', 1)[0]} {float(line.rsplit(' ', 1)[1]) + 500}"
        if line.startswith((f"{TTFT}_bucket", f"{TTFT}_count"))
        and 'le="0.1"' not in line
        and 'le="0.02"' not in line
        else line
        for line in text.splitlines()
    )
    samples: list[Sample] = []
    for i, t in enumerate((text, other)):
        n = Normalizer("vllm", source=f"http://h{i}:8000/metrics", buckets=True)
        samples += n.normalize_text(t, 1.0)
    exported = text_string_to_metric_families(render(samples).decode())
    fam = next(f for f in exported if f.name == "infersight_engine_ttft_seconds")
    assert fam.type == "histogram"
    summed: dict[float, float] = {}
    for s in fam.samples:
        if s.name.endswith("_bucket"):
            le = float(s.labels["le"])
            summed[le] = summed.get(le, 0.0) + s.value
    hists = [h for t in (text, other) for h in parse_metrics(t)[1]]
    engine = merge_buckets(h for h in hists if h.family == TTFT)
    assert len(summed) == len(engine) >= 5  # the engine's own bounds, all of them
    for q in (0.5, 0.9, 0.99):
        assert histogram_quantile(q, sorted(summed.items())) == histogram_quantile(q, engine)
    # each replica alone has another p90 than the pair: a per-replica summary could not add up
    alone = merge_buckets(h for h in parse_metrics(text)[1] if h.family == TTFT)
    assert histogram_quantile(0.9, alone) != histogram_quantile(0.9, engine)
    counts = [s.value for s in fam.samples if s.name.endswith("_count")]
    infs = [s.value for s in fam.samples if s.labels.get("le") == "+Inf"]
    assert counts == infs and len(counts) == 2


def test_every_exported_family_has_real_help_and_is_documented() -> None:
    samples = [
        Sample(1.0, name, 1.0, {"cpu": cpu, "stat": "count"})
        for name in EXPORTED
        for cpu in ("all", "0")
    ]
    fams = list(text_string_to_metric_families(render(samples).decode()))
    served = {f.name + ("_total" if f.type == "counter" else "") for f in fams}
    assert served >= {e.name for forms in EXPORTED.values() for e in forms}
    for f in fams:
        assert len(f.documentation) > 12, f.name
        assert not f.documentation.startswith(("engine.", "gpu.", "host.")), f.name
    docs = DOCS.read_text()
    for forms in EXPORTED.values():
        for e in forms:
            assert f"`{e.name}`" in docs, e.name
    for name in EXPORTER_OWN:
        assert f"`{name}`" in docs, name


def test_every_normalised_engine_name_is_exported() -> None:
    """A name added to engines.toml without an exported form would vanish silently."""
    names = {r.name for s in engine_specs().values() for rs in s.metrics.values() for r in rs}
    missing = sorted(n for n in names if n not in EXPORTED)
    assert missing == [], f"add to telemetry/exporter/names.py and docs: {missing}"


def test_docs_generated_block_is_up_to_date() -> None:
    docs = DOCS.read_text()
    block = docs.split(BEGIN, 1)[1].split(END, 1)[0]
    assert block == "\n" + reference_markdown() + "\n", (
        "docs/metrics.md is stale: run python -m infersight.telemetry.exporter.docs docs/metrics.md"
    )


def test_docs_gateway_table_matches_the_gateway_registry() -> None:
    from infersight.gateway.metrics import GatewayMetrics
    from infersight.gateway.shared.metrics import SharedMetrics

    docs = DOCS.read_text().split("## The gateway's own metrics", 1)[1]
    rows = {
        line.split("|")[1].strip(" `"): line.split("|")[2].strip()
        for line in docs.splitlines()
        if line.startswith("| `infersight_gateway_")
    }
    gm = GatewayMetrics()
    SharedMetrics(gm.registry)  # a replica sharing state through Redis adds these
    real = {
        f.name + ("_total" if f.type == "counter" else ""): f.type for f in gm.registry.collect()
    }
    assert rows == real


def test_pcie_throughput_is_integrated_into_a_byte_counter() -> None:
    """NVML gives bytes/s; the exporter serves a counter whose rate() is the throughput."""
    box: list[Sample] = []
    reg = CollectorRegistry()
    col = TelemetryCollector(lambda: box)
    reg.register(col)
    name = "infersight_gpu_pcie_receive_bytes_total"
    for t, rate in ((10.0, 1000.0), (11.0, 2000.0), (13.0, 500.0)):
        box[:] = [Sample(t, "gpu.pcie_rx_bytes_per_s", rate, {"gpu": "0"})]
        col.observe(box)
        col.observe(box)  # the same round twice (listener and scrape) counts once
    assert reg.get_sample_value(name, {"gpu": "0"}) == 2000.0 * 1 + 500.0 * 2
    assert b"# TYPE infersight_gpu_pcie_receive_bytes_total counter" in generate_latest(reg)


def test_collector_reads_the_source_at_scrape_time() -> None:
    box: list[Sample] = [Sample(1.0, "engine.requests_waiting", 1.0, dict(E))]
    reg = CollectorRegistry()
    reg.register(TelemetryCollector(lambda: box, rounds=lambda: 7, last_round=lambda: None))
    assert b"infersight_engine_requests_waiting{" in generate_latest(reg)
    assert reg.get_sample_value("infersight_exporter_rounds_total") == 7
    box[:] = [Sample(2.0, "engine.requests_waiting", 9.0, dict(E))]
    assert reg.get_sample_value("infersight_engine_requests_waiting", E) == 9.0


def test_gpu_info_from_static_descriptions() -> None:
    reg = CollectorRegistry()
    gpus = [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-1", "driver_version": "550"}]
    reg.register(TelemetryCollector(list, gpus=gpus))
    labels = {"gpu": "0", "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-1", "driver_version": "550"}
    assert reg.get_sample_value("infersight_gpu_info", labels) == 1.0


def test_exported_name() -> None:
    assert exported_name("gpu.utilization") == "infersight_gpu_utilization"
    assert exported_name("gpu.temperature_c") == "infersight_gpu_temperature_celsius"
    assert exported_name("host.cpu_percent", {"cpu": "3"}) == "infersight_host_cpu_core_percent"
    assert exported_name("raw.vllm:iteration_tokens_total_sum") is None


async def test_scrape_never_waits_on_a_slow_engine() -> None:
    """The engine answers its first /metrics, then holds every later one until the end
    of the test; exporter scrapes are answered meanwhile because they render cached
    samples (the background recorder does the slow scrape)."""
    text = (FIX / "vllm_v0_11.txt").read_text()
    release = asyncio.Event()
    engine = {"answered": 0, "held": 0}

    async def slow(_r: web.Request) -> web.Response:
        if engine["answered"]:
            engine["held"] += 1
            await release.wait()
        engine["answered"] += 1
        return web.Response(text=text)

    app = web.Application()
    app.router.add_get("/metrics", slow)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    srv = ExporterServer(Recorder([EngineScraper(url, buckets=True)], interval=0.2), port=0)
    try:
        await srv.start()
        # the first scrape is answered and the recorder's next one is held by the engine
        await until(lambda: engine["held"] >= 1, "the engine to hold a scrape")
        async with aiohttp.ClientSession() as s:
            for _ in range(20):
                # a /metrics that waited on the engine would never be answered here
                async with asyncio.timeout(10), s.get(srv.url + "/metrics") as r:
                    body = await r.text()
        assert engine["answered"] == 1  # all 20 served while the engine held its answer
        assert 'infersight_engine_requests_waiting{engine="vllm"' in body
        assert "infersight_engine_ttft_seconds_bucket{" in body
    finally:
        release.set()
        await srv.stop()
        await runner.cleanup()
