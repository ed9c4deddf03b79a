"""What to ask Prometheus for: the engines and exporters present (from series names,
by the name maps of ``engines.toml`` and ``dcgm.toml``) and one PromQL query per
normalised signal.

Gauges are aggregated per replica (``sum``/``max``/``avg by`` the replica's labels,
as the name map says); counters become ``rate()`` and histograms
``histogram_quantile()`` over ``rate()`` of their buckets, computed by Prometheus;
GPU series are kept per GPU. infersight's own exporter is read by the names
:func:`infersight.telemetry.exported_name` gives.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

from infersight.core.engines import EngineSpec, MetricRule, engine_specs
from infersight.core.errors import ConfigError
from infersight.telemetry.exporter.names import exported_name

__all__ = [
    "GpuExporterSpec",
    "Signal",
    "dcgm_signals",
    "dcgm_spec",
    "engine_signals",
    "exporter_signals",
    "metric_selector",
    "parse_selector",
]

#: Labels that identify a replica (and its host) on an engine's series.
ENGINE_BY = (
    "namespace",
    "pod",
    "job",
    "instance",
    "model_name",
    "node",
    "kubernetes_node",
    "nodename",
    "hostname",
    "Hostname",
    "host",
)
#: Labels kept on GPU series: the GPU, its host, the pod using it, the exporter.
GPU_BY = (
    "gpu",
    "UUID",
    "uuid",
    "GPU_I_ID",
    "Hostname",
    "hostname",
    "pod",
    "namespace",
    "exported_pod",
    "exported_namespace",
    "instance",
    "job",
)
#: Labels of infersight's exporter's series.
EXPORTER_BY = ("namespace", "pod", "job", "instance", "source", "engine")

#: Gauges and counters the rules read (docs/design.md section 5 symbols, request counts).
ENGINE_NAMES = (
    "engine.requests_running",
    "engine.requests_waiting",
    "engine.kv_cache_usage",
    "engine.slots",
    "engine.preemptions_total",
    "engine.requests_finished_total",
    "engine.requests_total",
)
#: Read too when the roofline floors can be computed (--model and --gpu): throughput.
PHYSICS_NAMES = ("engine.prompt_tokens_total", "engine.generation_tokens_total")
#: Histograms and the quantiles read from them: TTFT p99 ranks the worst windows ...
QUANTILES = {"engine.ttft_seconds": (0.99,)}
#: ... and the medians are compared with the roofline floors.
PHYSICS_QUANTILES = {
    "engine.ttft_seconds": (0.5,),
    "engine.itl_seconds": (0.5,),
    "engine.e2e_seconds": (0.5,),
}
#: GPU signals the rules read.
GPU_NAMES = ("gpu.utilization", "gpu.sm_activity")


def _wanted(physics: bool) -> tuple[tuple[str, ...], dict[str, tuple[float, ...]]]:
    names = ENGINE_NAMES + (PHYSICS_NAMES if physics else ())
    qs = {k: tuple(v) for k, v in QUANTILES.items()}
    if physics:
        for k, v in PHYSICS_QUANTILES.items():
            qs[k] = tuple(sorted(set(qs.get(k, ())) | set(v)))
    return names, qs


@dataclass(frozen=True, slots=True)
class Signal:
    """One query: ``promql`` (with ``{win}`` for the window) gives ``name``."""

    name: str
    promql: str
    #: "engine" (per replica), "gpu" (per GPU) or "exporter" (infersight exporter).
    family: str
    #: engines.toml key, "dcgm" or "exporter".
    source: str
    #: "" or the quantile label (p50, p99).
    stat: str = ""
    #: A rate: turned back into a cumulative counter for diagnose.
    counter: bool = False
    #: Extra labels the normalised series carries (process.cpu_percent{name=engine}).
    labels: tuple[tuple[str, str], ...] = ()
    #: One point per diagnosis window (``{win}`` is the window): the rules read only its
    #: mean or quantile over the window, so Prometheus computes that once per window.
    per_window: bool = False


@dataclass(frozen=True, slots=True)
class GpuExporterSpec:
    key: str
    label: str
    detect: tuple[str, ...]
    gpu_labels: tuple[str, ...]
    host_labels: tuple[str, ...]
    pod_labels: tuple[tuple[str, str], ...]
    metrics: dict[str, MetricRule]


@lru_cache(maxsize=1)
def dcgm_spec() -> GpuExporterSpec:
    """The dcgm-exporter name map shipped in ``data/telemetry/dcgm.toml``."""
    text = resources.files("infersight.data").joinpath("telemetry/dcgm.toml").read_text()
    t: dict[str, Any] = tomllib.loads(text)["dcgm"]
    metrics = {}
    for k, v in t["metrics"].items():
        rule = (
            MetricRule(v)
            if isinstance(v, str)
            else MetricRule(name=str(v["name"]), scale=float(v.get("scale", 1.0)))
        )
        metrics[k] = rule
    return GpuExporterSpec(
        key="dcgm",
        label=str(t["label"]),
        detect=tuple(t["detect"]),
        gpu_labels=tuple(t["gpu_labels"]),
        host_labels=tuple(t["host_labels"]),
        pod_labels=tuple((str(a), str(b)) for a, b in t["pod_labels"]),
        metrics=metrics,
    )


def parse_selector(text: str | None) -> str:
    """The matchers inside ``{...}`` (``{namespace="llm"}`` -> ``namespace="llm"``)."""
    s = (text or "").strip()
    if not s:
        return ""
    if s.startswith("{") != s.endswith("}"):
        raise ConfigError(
            f"--selector {text!r}: expected label matchers like '{{namespace=\"llm\"}}'"
        )
    inner = s[1:-1].strip() if s.startswith("{") else s
    if inner and not any(op in inner for op in ("=", "!=", "=~", "!~")):
        raise ConfigError(
            f"--selector {text!r}: expected label matchers like '{{namespace=\"llm\"}}'"
        )
    return inner.rstrip(",")


def metric_selector(metric: str, *matchers: str) -> str:
    """``vllm:num_requests_running{namespace="llm",kind="x"}``."""
    inner = ",".join(m for m in matchers if m)
    return f"{metric}{{{inner}}}" if inner else metric


def _rule_matchers(rule: MetricRule) -> list[str]:
    out = [f'{k}="{v}"' for k, v in rule.match]
    out += [f'{k}!="{v}"' for k, v in rule.exclude]
    return out


def _scaled(expr: str, scale: float) -> str:
    return expr if scale == 1.0 else f"({expr}) * {scale:g}"


def _present_rules(spec: EngineSpec, names: set[str]) -> dict[str, tuple[str, MetricRule]]:
    """normalised name -> (exposition name, rule), the first spelling the store has."""
    out: dict[str, tuple[str, MetricRule]] = {}
    for metric, rules in spec.metrics.items():
        for rule in rules:
            if rule.name in out:
                continue
            if rule.part is not None:
                present = f"{metric}_{rule.part}" in names
            else:
                present = metric in names or f"{metric}_bucket" in names
            if present:
                out[rule.name] = (metric, rule)
    return out


def engine_signals(
    spec: EngineSpec, names: set[str], matchers: str, physics: bool = False
) -> list[Signal]:
    """The queries for one engine kind's series (``names``: every name in the store)."""
    by = ", ".join(ENGINE_BY)
    out: list[Signal] = []
    rules = _present_rules(spec, names)
    wanted, quantiles = _wanted(physics)
    for name in wanted:
        if name not in rules:
            continue
        metric, rule = rules[name]
        if rule.part is not None:
            metric = f"{metric}_{rule.part}"
        sel = metric_selector(metric, matchers, *_rule_matchers(rule))
        if name.endswith("_total"):  # the rules read its mean rate over each window
            q = _scaled(f"sum by ({by}) (rate({sel}[{{win}}]))", rule.scale)
            out.append(Signal(name, q, "engine", spec.key, counter=True, per_window=True))
        else:
            agg = {"max": "max", "mean": "avg"}.get(rule.agg, "sum")
            out.append(
                Signal(name, _scaled(f"{agg} by ({by}) ({sel})", rule.scale), "engine", spec.key)
            )
    for name, qs in quantiles.items():
        if name not in rules or f"{rules[name][0]}_bucket" not in names:
            continue
        metric, rule = rules[name]
        sel = metric_selector(f"{metric}_bucket", matchers, *_rule_matchers(rule))
        for quant in qs:
            promql = f"histogram_quantile({quant:g}, sum by (le, {by}) (rate({sel}[{{win}}])))"
            out.append(
                Signal(
                    name, promql, "engine", spec.key, stat=f"p{round(quant * 100)}", per_window=True
                )
            )
    return out


def dcgm_signals(spec: GpuExporterSpec, names: set[str], matchers: str) -> list[Signal]:
    """One query per GPU field the store has, kept per GPU."""
    by = ", ".join(GPU_BY)
    out = []
    for metric, rule in spec.metrics.items():
        if metric in names and rule.name in GPU_NAMES:
            sel = metric_selector(metric, matchers)
            q = _scaled(f"max by ({by}) (avg_over_time({sel}[{{win}}]))", rule.scale)
            out.append(Signal(rule.name, q, "gpu", spec.key, per_window=True))
    return out


def exporter_signals(names: set[str], matchers: str, physics: bool = False) -> list[Signal]:
    """infersight exporter series: engine gauges, counters and latency quantiles, GPU
    and the engine process's CPU (for a CPU engine, the device)."""
    by = ", ".join(EXPORTER_BY)
    out: list[Signal] = []
    wanted, quantiles = _wanted(physics)
    for name in wanted:
        metric = exported_name(name)
        if metric not in names:
            continue
        sel = metric_selector(metric, matchers)
        if name.endswith("_total"):
            out.append(
                Signal(
                    name,
                    f"sum by ({by}) (rate({sel}[{{win}}]))",
                    "exporter",
                    "exporter",
                    counter=True,
                    per_window=True,
                )
            )
        else:
            out.append(Signal(name, f"max by ({by}) ({sel})", "exporter", "exporter"))
    for name, qs in quantiles.items():
        metric = exported_name(name)
        for q in qs:
            stat = f"p{round(q * 100)}"
            if f"{metric}_bucket" in names:  # a histogram: aggregable across instances
                sel = metric_selector(f"{metric}_bucket", matchers)
                promql = f"histogram_quantile({q:g}, sum by (le, {by}) (rate({sel}[{{win}}])))"
            elif metric in names:  # a summary's last-interval quantile
                quantile = 'quantile="' + f"{q:g}" + '"'
                sel = metric_selector(metric, matchers, quantile)
                promql = f"max by ({by}) (max_over_time({sel}[{{win}}]))"
            else:
                continue
            out.append(Signal(name, promql, "exporter", "exporter", stat=stat, per_window=True))
    for name in GPU_NAMES:
        metric = exported_name(name)
        if metric in names:
            sel = metric_selector(metric, matchers)
            out.append(
                Signal(
                    name,
                    f"max by ({by}, gpu) (avg_over_time({sel}[{{win}}]))",
                    "gpu",
                    "exporter",
                    per_window=True,
                )
            )
    cpu = exported_name("process.cpu_percent")
    if cpu in names:
        sel = metric_selector(cpu, matchers, 'name="engine"')
        out.append(
            Signal(
                "process.cpu_percent",
                f"sum by ({by}) (avg_over_time({sel}[{{win}}]))",
                "exporter",
                "exporter",
                labels=(("name", "engine"),),
                per_window=True,
            )
        )
    return out


def detected_engines(names: set[str]) -> list[EngineSpec]:
    """Engine kinds with series in the store (by their engines.toml prefixes)."""
    return [
        spec for spec in engine_specs().values() if any(n.startswith(spec.detect) for n in names)
    ]
