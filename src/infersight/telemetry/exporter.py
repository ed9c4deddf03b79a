"""Prometheus exporter: a ``prometheus_client`` Collector over the recorder's latest
round, served with ``/metrics`` and ``/health`` on 127.0.0.1 by default.

Names are stable: sample ``a.b_c`` becomes ``infersight_a_b_c`` (``gpu.utilization`` ->
``infersight_gpu_utilization``). Names ending in ``_total`` are counters; engine
histograms (``stat`` label) become summaries: ``<name>_sum`` and ``<name>_count``
since the engine started, and ``<name>{quantile="0.5|0.9|0.99"}`` over the last
scrape interval. Values that are not available are left out (absence is how
Prometheus says "no data"); ``raw.*`` engine metrics are not re-exported (scrape the
engine directly for those). A scrape never reaches upstream: it renders the samples
cached by the background recorder, so it takes about a millisecond.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    Metric,
    SummaryMetricFamily,
)
from prometheus_client.registry import Collector

from infersight.core.records import Sample

__all__ = ["PREFIX", "TelemetryCollector", "exported_name", "render"]

PREFIX = "infersight_"
_QUANTILE = {"p50": "0.5", "p90": "0.9", "p99": "0.99"}

HELP: dict[str, str] = {
    "gpu.utilization": "NVML utilisation: fraction of time any kernel ran (0..1).",
    "gpu.sm_activity": "NVML GPM SM utilisation: fraction of SMs busy (0..1).",
    "gpu.sm_occupancy": "NVML GPM SM occupancy: resident warps vs maximum (0..1).",
    "gpu.memory_used_bytes": "GPU memory in use.",
    "gpu.memory_total_bytes": "GPU memory size.",
    "gpu.power_watts": "GPU power draw.",
    "gpu.power_limit_watts": "GPU enforced power limit.",
    "gpu.sm_clock_mhz": "SM clock.",
    "gpu.mem_clock_mhz": "Memory clock.",
    "gpu.temperature_c": "GPU temperature (Celsius).",
    "gpu.pcie_rx_bytes_per_s": "PCIe receive throughput.",
    "gpu.pcie_tx_bytes_per_s": "PCIe transmit throughput.",
    "gpu.throttle_reasons": "NVML clock-event (throttle) reason bitmask.",
    "gpu.process_memory_bytes": "GPU memory used by a process.",
    "host.cpu_percent": "Host CPU busy percent (cpu=all or a core index).",
    "host.memory_used_bytes": "Host memory in use (total - available).",
    "host.memory_total_bytes": "Host memory size.",
    "host.net_rx_bytes_total": "Host network bytes received.",
    "host.net_tx_bytes_total": "Host network bytes sent.",
    "process.cpu_percent": "CPU percent of a watched process (100 = one core).",
    "process.rss_bytes": "Resident memory of a watched process.",
    "engine.up": "1 when the last scrape of the engine's /metrics succeeded.",
    "engine.scrape_duration_seconds": "Time the last engine scrape took.",
    "engine.requests_running": "Requests being processed by the engine.",
    "engine.requests_waiting": "Requests queued in the engine.",
    "engine.kv_cache_usage": "KV-cache usage (0..1).",
    "engine.slots": "Slot / sequence limit of the engine.",
    "engine.preemptions_total": "Requests preempted by the engine.",
    "engine.prompt_tokens_total": "Prompt tokens processed.",
    "engine.generation_tokens_total": "Tokens generated.",
    "engine.requests_total": "Requests received.",
    "engine.request_errors_total": "Requests that failed.",
    "engine.ttft_seconds": "Time to first token.",
    "engine.itl_seconds": "Inter-token latency.",
    "engine.e2e_seconds": "End-to-end request latency.",
    "engine.queue_time_seconds": "Time requests spent queued.",
}


def exported_name(sample_name: str) -> str:
    """``gpu.utilization`` -> ``infersight_gpu_utilization``."""
    return PREFIX + sample_name.replace(".", "_").replace(":", "_").replace("-", "_")


def _families(samples: Iterable[Sample]) -> list[Metric]:
    plain: dict[str, list[Sample]] = {}
    hist: dict[str, list[Sample]] = {}
    for s in samples:
        if s.value is None or s.name.startswith("raw."):
            continue
        (hist if "stat" in s.labels else plain).setdefault(s.name, []).append(s)
    out: list[Metric] = []
    for name, ss in plain.items():
        full = exported_name(name)
        doc = HELP.get(name, name)
        fam: Metric
        if full.endswith("_total"):
            fam = CounterMetricFamily(full[: -len("_total")], doc)
        else:
            fam = GaugeMetricFamily(full, doc)
        seen: set[tuple[tuple[str, str], ...]] = set()
        for s in ss:
            key = tuple(sorted(s.labels.items()))
            if key in seen:  # one value per label set (the latest round has one)
                continue
            seen.add(key)
            suffix = "_total" if isinstance(fam, CounterMetricFamily) else ""
            fam.add_sample(fam.name + suffix, dict(s.labels), float(s.value))  # type: ignore[arg-type]
        out.append(fam)
    for name, ss in hist.items():
        full = exported_name(name)
        sm = SummaryMetricFamily(full, HELP.get(name, name))
        for s in ss:
            labels = {k: v for k, v in s.labels.items() if k != "stat"}
            stat = s.labels["stat"]
            value = float(s.value)  # type: ignore[arg-type]
            if stat in ("sum", "count"):
                sm.add_sample(f"{full}_{stat}", labels, value)
            elif stat in _QUANTILE:
                sm.add_sample(full, {**labels, "quantile": _QUANTILE[stat]}, value)
        out.append(sm)
    return out


class TelemetryCollector(Collector):
    """Yields the latest samples from ``source`` (any callable returning samples,
    e.g. ``Recorder.latest``) as Prometheus metric families, plus the exporter's own
    ``infersight_exporter_*`` health metrics."""

    def __init__(
        self,
        source: Callable[[], Iterable[Sample]],
        *,
        rounds: Callable[[], int] | None = None,
        last_round: Callable[[], float | None] | None = None,
    ) -> None:
        self.source = source
        self._rounds = rounds
        self._last_round = last_round

    def collect(self) -> Iterator[Metric]:
        yield from _families(self.source())
        up = GaugeMetricFamily("infersight_exporter_up", "1 while the exporter is serving.")
        up.add_metric([], 1.0)
        yield up
        if self._rounds is not None:
            c = CounterMetricFamily("infersight_exporter_rounds", "Telemetry rounds taken.")
            c.add_metric([], float(self._rounds()))
            yield c
        if self._last_round is not None:
            t = self._last_round()
            if t is not None:
                age = GaugeMetricFamily(
                    "infersight_exporter_sample_age_seconds",
                    "Seconds since the latest telemetry round.",
                )
                age.add_metric([], max(0.0, time.monotonic() - t))
                yield age


def render(samples: Iterable[Sample]) -> bytes:
    """Prometheus text for a list of samples (fresh registry; for tests and tools)."""
    reg = CollectorRegistry(auto_describe=True)
    items = list(samples)
    reg.register(TelemetryCollector(lambda: items))
    data: bytes = generate_latest(reg)
    return data
