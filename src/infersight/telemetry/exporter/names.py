"""The exporter's metric names: one table from sample names to Prometheus families.

These names are a public interface (dashboards, alerts and ``diagnose --prometheus``
read them) and are listed in ``docs/metrics.md``; a test keeps the two in step.
Only what is in this table is exported. Conventions (Prometheus' own): base units
(``_seconds``, ``_bytes``, ``_hertz``, ``_celsius``, ``_watts``), counters end in
``_total``, 0..1 ratios carry no unit, percentages end in ``_percent``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = [
    "EXPORTED",
    "EXPORTER_OWN",
    "GPU_INFO",
    "INTEGRATED",
    "Exported",
    "exported_for",
    "exported_name",
]

Kind = Literal["gauge", "counter", "histogram"]


@dataclass(frozen=True, slots=True)
class Exported:
    """How one sample name (or a labelled part of it) is exported."""

    #: Prometheus name as scraped (counters with ``_total``; histograms without
    #: ``_bucket``/``_sum``/``_count``).
    name: str
    kind: Kind
    help: str
    #: Multiply the sample's value (MHz -> Hz).
    scale: float = 1.0
    #: Only samples with these label values (e.g. ``cpu="all"``).
    only: tuple[tuple[str, str], ...] = ()
    #: Labels left out of the exported series.
    drop: tuple[str, ...] = ()
    #: The sample is a rate (per second): export its integral over time as a counter.
    integrate: bool = False

    def matches(self, labels: dict[str, str]) -> bool:
        return all(labels.get(k) == v for k, v in self.only)


def _g(
    name: str,
    help: str,
    *,
    scale: float = 1.0,
    only: tuple[tuple[str, str], ...] = (),
    drop: tuple[str, ...] = (),
) -> Exported:
    return Exported("infersight_" + name, "gauge", help, scale=scale, only=only, drop=drop)


def _c(name: str, help: str, *, integrate: bool = False) -> Exported:
    return Exported("infersight_" + name, "counter", help, integrate=integrate)


def _h(name: str, help: str) -> Exported:
    return Exported("infersight_" + name, "histogram", help)


_ENGINE_HIST = " Histogram (the engine's own buckets, cumulative since it started)."

#: Sample name -> its exported forms, tried in order (the first whose ``only`` matches).
EXPORTED: dict[str, tuple[Exported, ...]] = {
    # -- host and watched processes (HostSampler) ----------------------------------------
    "host.cpu_percent": (
        _g(
            "host_cpu_percent",
            "Host CPU busy, averaged over all cores (0..100).",
            only=(("cpu", "all"),),
            drop=("cpu",),
        ),
        _g("host_cpu_core_percent", "CPU busy of one core (0..100), label cpu = core index."),
    ),
    "host.memory_used_bytes": (
        _g("host_memory_used_bytes", "Host memory in use (total - available)."),
    ),
    "host.memory_total_bytes": (_g("host_memory_total_bytes", "Host memory size (total)."),),
    "host.net_rx_bytes_total": (
        _c("host_network_receive_bytes_total", "Bytes received on all host network interfaces."),
    ),
    "host.net_tx_bytes_total": (
        _c("host_network_transmit_bytes_total", "Bytes sent on all host network interfaces."),
    ),
    "process.cpu_percent": (
        _g(
            "process_cpu_percent",
            "CPU of a watched process and its children if asked (100 = one core).",
        ),
    ),
    "process.rss_bytes": (
        _g("process_resident_memory_bytes", "Resident memory of a watched process."),
    ),
    # -- GPUs (GpuSampler, NVML), label gpu = NVML index ---------------------------------
    "gpu.utilization": (
        _g(
            "gpu_utilization",
            "NVML utilisation: fraction of time any kernel ran (0..1); not how much of the GPU it "
            "used.",
        ),
    ),
    "gpu.sm_activity": (
        _g(
            "gpu_sm_activity",
            "NVML GPM SM activity: fraction of SMs busy (0..1; Hopper and newer).",
        ),
    ),
    "gpu.sm_occupancy": (
        _g(
            "gpu_sm_occupancy",
            "NVML GPM SM occupancy: resident warps / maximum (0..1; Hopper and newer).",
        ),
    ),
    "gpu.memory_used_bytes": (_g("gpu_memory_used_bytes", "GPU memory in use (all processes)."),),
    "gpu.memory_total_bytes": (_g("gpu_memory_total_bytes", "GPU memory size (total)."),),
    "gpu.power_watts": (_g("gpu_power_watts", "GPU power draw (NVML power usage)."),),
    "gpu.power_limit_watts": (_g("gpu_power_limit_watts", "GPU enforced power limit."),),
    "gpu.sm_clock_mhz": (_g("gpu_sm_clock_hertz", "Current SM (graphics) clock.", scale=1e6),),
    "gpu.mem_clock_mhz": (_g("gpu_memory_clock_hertz", "Current GPU memory clock.", scale=1e6),),
    "gpu.temperature_c": (_g("gpu_temperature_celsius", "GPU core temperature."),),
    "gpu.pcie_rx_bytes_per_s": (
        _c(
            "gpu_pcie_receive_bytes_total",
            "PCIe bytes received by the GPU, integrated from NVML's sampled throughput at each "
            "round (rate() of it is the mean throughput).",
            integrate=True,
        ),
    ),
    "gpu.pcie_tx_bytes_per_s": (
        _c(
            "gpu_pcie_transmit_bytes_total",
            "PCIe bytes sent by the GPU, integrated from NVML's sampled throughput at each round.",
            integrate=True,
        ),
    ),
    "gpu.throttle_reasons": (
        _g(
            "gpu_throttle_reasons",
            "NVML clock-event (throttle) reason bitmask: 0x4 sw power cap, 0x8 hw slowdown, 0x20 "
            "sw thermal, 0x40 hw thermal, 0x80 power brake.",
        ),
    ),
    "gpu.process_memory_bytes": (
        _g("gpu_process_memory_bytes", "GPU memory used by one process (label pid)."),
    ),
    # -- engines (EngineScraper), labels engine and source (the scraped /metrics URL) ----
    "engine.up": (
        _g("engine_up", "1 when the last scrape of the engine's /metrics succeeded, else 0."),
    ),
    "engine.scrape_duration_seconds": (
        _g("engine_scrape_duration_seconds", "Time the last scrape of the engine's /metrics took."),
    ),
    "engine.requests_running": (
        _g(
            "engine_requests_running",
            "Requests being generated (holding a slot / in the running batch).",
        ),
    ),
    "engine.requests_waiting": (
        _g("engine_requests_waiting", "Requests queued in the engine, not yet running."),
    ),
    "engine.requests_swapped": (
        _g("engine_requests_swapped", "Requests swapped out to CPU memory (vLLM V0)."),
    ),
    "engine.requests_retracted": (
        _g("engine_requests_retracted", "Requests retracted in the last scheduler step (SGLang)."),
    ),
    "engine.slots": (
        _g(
            "engine_slots",
            "The engine's limit on concurrently running requests (slots / max sequences), when it "
            "can be read.",
        ),
    ),
    "engine.kv_cache_usage": (_g("engine_kv_cache_usage", "KV-cache usage (0..1)."),),
    "engine.kv_cache_tokens": (_g("engine_kv_cache_tokens", "Tokens held in the KV cache."),),
    "engine.kv_capacity_tokens": (
        _g("engine_kv_capacity_tokens", "Tokens the KV cache holds when full (vLLM)."),
    ),
    "engine.kv_block_tokens": (
        _g("engine_kv_block_tokens", "Tokens per KV-cache block, the unit of allocation (vLLM)."),
    ),
    "engine.requests_waiting_deferred": (
        _g(
            "engine_requests_waiting_deferred",
            "Requests waiting for a reason other than capacity (vLLM's 'deferred').",
        ),
    ),
    "engine.requests_waiting_for_capacity": (
        _g(
            "engine_requests_waiting_for_capacity",
            "Requests waiting because the running batch or the KV cache is full (vLLM).",
        ),
    ),
    "engine.batch_max_tokens": (
        _g("engine_batch_max_tokens", "Token budget of the current batch (TGI)."),
    ),
    "engine.busy_slots_per_decode": (
        _g(
            "engine_busy_slots_per_decode",
            "Mean busy slots per decode call since start (llama.cpp): the batch size decode "
            "really runs at.",
        ),
    ),
    "engine.prefix_cache_hit_ratio": (
        _g(
            "engine_prefix_cache_hit_ratio", "Prefix-cache hit ratio reported by the engine (0..1)."
        ),
    ),
    "engine.generation_tokens_per_second": (
        _g(
            "engine_generation_tokens_per_second",
            "Generation throughput as the engine reports it (SGLang's own estimate).",
        ),
    ),
    "engine.preemptions_total": (
        _c(
            "engine_preemptions_total",
            "Requests preempted (vLLM) or retracted (SGLang) for lack of KV-cache space.",
        ),
    ),
    "engine.prompt_tokens_total": (
        _c("engine_prompt_tokens_total", "Prompt (prefill) tokens processed."),
    ),
    "engine.prompt_tokens_cached_total": (
        _c(
            "engine_prompt_tokens_cached_total",
            "Prompt tokens served from the prefix cache instead of computed.",
        ),
    ),
    "engine.generation_tokens_total": (
        _c("engine_generation_tokens_total", "Tokens generated (output tokens)."),
    ),
    "engine.requests_total": (
        _c("engine_requests_total", "Requests received (TGI, the infersight gateway)."),
    ),
    "engine.requests_finished_total": (
        _c(
            "engine_requests_finished_total", "Requests finished by the engine (any finish reason)."
        ),
    ),
    "engine.requests_aborted_total": (
        _c(
            "engine_requests_aborted_total",
            "Requests aborted before they finished (client gone, cancelled).",
        ),
    ),
    "engine.request_errors_total": (
        _c("engine_request_errors_total", "Requests that ended in an error."),
    ),
    "engine.rejections_total": (
        _c(
            "engine_rejections_total",
            "Requests the infersight gateway refused before an upstream saw them.",
        ),
    ),
    "engine.truncated_streams_total": (
        _c(
            "engine_truncated_streams_total",
            "Streams the infersight gateway saw end without a finish.",
        ),
    ),
    "engine.cost_usd_total": (
        _c("engine_cost_usd_total", "Cost in US dollars accounted by the infersight gateway."),
    ),
    "engine.prompt_seconds_total": (
        _c(
            "engine_prompt_seconds_total",
            "Time spent processing prompts, summed over slots (llama.cpp).",
        ),
    ),
    "engine.generation_seconds_total": (
        _c(
            "engine_generation_seconds_total",
            "Time spent generating tokens, summed over slots (llama.cpp).",
        ),
    ),
    "engine.decode_steps_total": (
        _c("engine_decode_steps_total", "Decode calls (llama.cpp llama_decode)."),
    ),
    "engine.prefix_cache_queries_total": (
        _c(
            "engine_prefix_cache_queries_total",
            "Prompt tokens looked up in the prefix cache (llama.cpp: processed + cached).",
        ),
    ),
    "engine.prefix_cache_hits_total": (
        _c(
            "engine_prefix_cache_hits_total",
            "Prompt tokens found in the prefix cache; hits / queries is the hit rate.",
        ),
    ),
    "engine.ttft_seconds": (_h("engine_ttft_seconds", "Time to first token." + _ENGINE_HIST),),
    "engine.itl_seconds": (_h("engine_itl_seconds", "Inter-token latency." + _ENGINE_HIST),),
    "engine.tpot_seconds": (
        _h("engine_tpot_seconds", "Mean time per output token of each request." + _ENGINE_HIST),
    ),
    "engine.e2e_seconds": (_h("engine_e2e_seconds", "End-to-end request latency." + _ENGINE_HIST),),
    "engine.queue_time_seconds": (
        _h(
            "engine_queue_time_seconds",
            "Time requests waited in the engine's queue." + _ENGINE_HIST,
        ),
    ),
    "engine.prefill_time_seconds": (
        _h("engine_prefill_time_seconds", "Prefill phase time of each request." + _ENGINE_HIST),
    ),
    "engine.decode_time_seconds": (
        _h("engine_decode_time_seconds", "Decode phase time of each request." + _ENGINE_HIST),
    ),
    "engine.inference_time_seconds": (
        _h(
            "engine_inference_time_seconds",
            "Running (prefill + decode) time of each request." + _ENGINE_HIST,
        ),
    ),
}

#: The exporter's own series (name -> kind, help).
EXPORTER_OWN: dict[str, tuple[Kind, str]] = {
    "infersight_exporter_up": ("gauge", "1 while the exporter is serving."),
    "infersight_exporter_rounds_total": (
        "counter",
        "Telemetry rounds taken since the exporter started.",
    ),
    "infersight_exporter_sample_age_seconds": (
        "gauge",
        "Seconds since the latest telemetry round.",
    ),
    "infersight_exporter_gpus": (
        "gauge",
        "GPUs the exporter reads (0: no GPU, or no NVML driver).",
    ),
}

#: Static description of each GPU, value 1 (labels gpu, name, uuid, driver_version).
GPU_INFO = ("infersight_gpu_info", "GPU model, UUID and driver; value 1.")


#: Sample names of the rates exported as integrated counters.
INTEGRATED = frozenset(n for n, forms in EXPORTED.items() if any(e.integrate for e in forms))


def exported_for(sample_name: str, labels: dict[str, str]) -> Exported | None:
    """How a sample is exported, or None when it is not (``raw.*``, unknown names)."""
    forms = EXPORTED.get(sample_name)
    if forms is None:
        return None
    if len(forms) == 1 and not forms[0].only:  # nearly every name: no label to look at
        return forms[0]
    for e in forms:
        if e.matches(labels):
            return e
    return None


def exported_name(sample_name: str, labels: dict[str, str] | None = None) -> str | None:
    """The Prometheus name a sample is exported under (``gpu.temperature_c`` ->
    ``infersight_gpu_temperature_celsius``), or None when it is not exported."""
    e = exported_for(sample_name, labels or {})
    return None if e is None else e.name
