"""infersight.telemetry: GPU (NVML), host (psutil) and engine (/metrics) samplers,
one normalised stream of :class:`~infersight.core.records.Sample`, and a recorder.

Usage (:func:`build_recorder` is the one place samplers are wired together)::

    tel = build_recorder(processes={"engine": pid, "loadgen": os.getpid()},
                         scrape=["http://127.0.0.1:8000/metrics"], interval=1.0)
    async with tel.recorder as rec:
        ...
    result.samples = rec.samples()

:func:`sample_url` watches a live server for a while and returns a RunResult;
:func:`run_exporter` serves the samples as Prometheus metrics, under the names of
:mod:`.exporter.names` (documented in ``docs/metrics.md``).

Reading a store instead of sampling (``diagnose --prometheus``)::

    async with PrometheusClient(url, load_auth(http_config)) as prom:
        fleet = await discover_fleet(prom, start=t0, end=t1, step=15)
        async for page in fleet.pages(window=300):   # FleetPage: replica -> series
            ...

The engines (``engines.toml``), dcgm-exporter (``dcgm.toml``) and this package's own
exporter are found by their metric names; rates and quantiles are computed by Prometheus.

Sample names (value None = not available):

- host: ``host.cpu_percent`` {cpu="all"|index} (0..100), ``host.memory_used_bytes``,
  ``host.memory_total_bytes``, ``host.net_rx_bytes_total``, ``host.net_tx_bytes_total``,
  ``process.cpu_percent`` {name, pid} (100 = one core), ``process.rss_bytes``;
- GPU {gpu=index}: ``gpu.utilization``, ``gpu.sm_activity``, ``gpu.sm_occupancy``
  (0..1), ``gpu.memory_used_bytes``, ``gpu.memory_total_bytes``, ``gpu.power_watts``,
  ``gpu.power_limit_watts``, ``gpu.sm_clock_mhz``, ``gpu.mem_clock_mhz``,
  ``gpu.temperature_c``, ``gpu.pcie_rx_bytes_per_s``, ``gpu.pcie_tx_bytes_per_s``,
  ``gpu.throttle_reasons`` (bitmask, see :func:`throttle_reason_names`),
  ``gpu.process_memory_bytes`` {gpu, pid};
- engine {engine, source}: ``engine.up``, ``engine.scrape_duration_seconds``,
  ``engine.requests_running``, ``engine.requests_waiting``, ``engine.slots``,
  ``engine.kv_cache_usage`` (0..1), ``engine.preemptions_total``,
  ``engine.prompt_tokens_total``, ``engine.generation_tokens_total``,
  ``engine.requests_total``, ``engine.requests_finished_total``,
  ``engine.requests_aborted_total``, ``engine.request_errors_total`` and the histograms
  ``engine.ttft_seconds``, ``engine.itl_seconds``, ``engine.tpot_seconds``,
  ``engine.e2e_seconds``, ``engine.queue_time_seconds`` with {stat=sum|count}
  (cumulative) and {stat=p50|p90|p99} (over the last scrape interval), and with
  ``buckets=True`` (the exporter's scrapers) {stat=bucket, le} (cumulative); what each
  engine provides is in ``data/telemetry/engines.toml``, the full list in
  ``docs/metrics.md``. Anything else an engine exports: ``raw.<name>``.
"""

from infersight.telemetry.base import Sampler
from infersight.telemetry.engine_metrics import Normalizer, detect_engine, engine_specs
from infersight.telemetry.exporter.collector import TelemetryCollector, render
from infersight.telemetry.exporter.names import exported_name
from infersight.telemetry.exporter.server import ExporterServer, run_exporter
from infersight.telemetry.gpu import GpuSampler, throttle_reason_names
from infersight.telemetry.host import HostSampler
from infersight.telemetry.live import sample_url, sample_url_async
from infersight.telemetry.nvml import (
    NvmlBackend,
    NvmlFieldError,
    NvmlUnavailable,
    PynvmlBackend,
    ReplayBackend,
)
from infersight.telemetry.prometheus.auth import PrometheusAuth, load_auth
from infersight.telemetry.prometheus.fleet import Fleet, discover_fleet
from infersight.telemetry.prometheus.http import PrometheusClient
from infersight.telemetry.promtext import histogram_quantile, parse_metrics
from infersight.telemetry.recorder import Recorder, read_samples
from infersight.telemetry.scraper import EngineScraper, metrics_url
from infersight.telemetry.wiring import Telemetry, build_recorder

__all__ = [
    "EngineScraper",
    "ExporterServer",
    "Fleet",
    "GpuSampler",
    "HostSampler",
    "Normalizer",
    "NvmlBackend",
    "NvmlFieldError",
    "NvmlUnavailable",
    "PrometheusAuth",
    "PrometheusClient",
    "PynvmlBackend",
    "Recorder",
    "ReplayBackend",
    "Sampler",
    "Telemetry",
    "TelemetryCollector",
    "build_recorder",
    "detect_engine",
    "discover_fleet",
    "engine_specs",
    "exported_name",
    "histogram_quantile",
    "load_auth",
    "metrics_url",
    "parse_metrics",
    "read_samples",
    "render",
    "run_exporter",
    "sample_url",
    "sample_url_async",
    "throttle_reason_names",
]
