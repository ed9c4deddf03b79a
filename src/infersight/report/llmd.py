"""llm-d-benchmark's benchmark report (version 0.1), written from a RunResult.

llm-d-benchmark defines a harness-neutral report that its pipelines and dashboards
read: a ``scenario`` (what was measured: model, engine, load) and ``metrics`` (the
aggregates of one load point). A report describes one point of a sweep, so a run gives
one report per level. The figures are the level's own aggregates (its measurement
window), converted to the format's units (ms, ms/token, counts). What the format has
no field for (the verdicts, the limiter, the fix and the validity checks) goes under
``metadata.infersight``, which the format allows. docs/design.md section 2 ("Export")
maps each field.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from infersight.core.records import RequestRecord, RunResult
from infersight.report.files import write_json
from infersight.report.view import build_view

__all__ = ["LLMD_VERSION", "llmd_reports", "write_llmd"]

#: The benchmark report's format version written here.
LLMD_VERSION = "0.1"
#: The format's statistics keys for ours (its p99.9 is spelled p99p9).
_STAT_KEYS = (
    ("mean", "mean"),
    ("std", "stddev"),
    ("min", "min"),
    ("p50", "p50"),
    ("p90", "p90"),
    ("p95", "p95"),
    ("p99", "p99"),
    ("p99.9", "p99p9"),
    ("max", "max"),
)


def _finite(x: Any) -> float | None:
    return float(x) if isinstance(x, int | float) and math.isfinite(x) else None


def _stats(agg: Any, units: str, scale: float = 1.0) -> dict[str, Any] | None:
    """One of our summaries (``{"mean", "std", "p50", ...}``) as the format's
    ``Statistics`` in ``units``; None without a mean (no value measured)."""
    if not isinstance(agg, Mapping) or _finite(agg.get("mean")) is None:
        return None
    out: dict[str, Any] = {"units": units}
    for ours, theirs in _STAT_KEYS:
        v = _finite(agg.get(ours))
        if v is not None:
            out[theirs] = v * scale
    return out


def _count_stats(values: Sequence[int]) -> dict[str, Any]:
    x = np.asarray(values, dtype=np.float64)
    if x.size == 0:
        return {"units": "count", "mean": 0.0}
    q = np.percentile(x, [10, 50, 90, 99])
    return {
        "units": "count",
        "mean": float(x.mean()),
        "stddev": float(x.std()),
        "min": float(x.min()),
        "p10": float(q[0]),
        "p50": float(q[1]),
        "p90": float(q[2]),
        "p99": float(q[3]),
        "max": float(x.max()),
    }


def _load(result: RunResult, agg: Mapping[str, Any]) -> dict[str, Any]:
    """The load of this one point: the level's own rate or clients, and the workload."""
    cfg = result.config
    target = agg.get("target") or {}
    rate, conc = target.get("rate"), target.get("concurrency")
    if isinstance(rate, int | float):
        kind, point = f"open loop at {rate:g} req/s", {"rate": rate}
    elif conc is not None:
        kind, point = f"closed loop with {conc} concurrent clients", {"concurrency": conc}
    else:
        kind, point = "trace replay", {}
    args = {
        k: cfg[k]
        for k in (
            "requests",
            "duration",
            "input_tokens",
            "output_tokens",
            "max_tokens",
            "dataset",
            "trace",
            "seed",
            "endpoint",
            "stream",
        )
        if cfg.get(k) not in (None, [], "")
    }
    return {"name": "infersight", "type": kind, "args": {**point, **args}}


def _engine(result: RunResult) -> dict[str, Any]:
    engine = result.config.get("engine")
    name = engine.get("engine") if isinstance(engine, Mapping) else None
    version = result.versions.get("xllamacpp") if name in (None, "llamacpp") else None
    args = {
        f"--{k.removeprefix('engine_')}": result.config[k]
        for k in ("engine_parallel", "engine_ctx", "engine_slots")
        if result.config.get(k) is not None
    }
    # A tune trial: the setting it tried (the engine's flags as the template named them).
    setting = result.config.get("tune_setting")
    if isinstance(setting, Mapping):
        args.update({f"--{k}": v for k, v in setting.items()})
    out: dict[str, Any] = {"name": str(name or "unknown"), "args": args}
    if version:
        out["version"] = version
    return out


def _host(result: RunResult) -> dict[str, Any] | None:
    gpus = result.environment.get("gpus") or []
    if not gpus:
        return None  # the format's host describes accelerators; a CPU run has none
    first = gpus[0] if isinstance(gpus[0], Mapping) else {}
    mem = _finite(first.get("memory_total_bytes"))
    acc: dict[str, Any] = {"model": str(first.get("name") or "unknown"), "count": len(gpus)}
    if mem is not None:
        acc["memory"] = round(mem / 1e9, 1)
    return {"accelerator": [acc], "type": ["replica"]}


def _service(result: RunResult, span: tuple[float, float]) -> dict[str, Any] | None:
    """Running and waiting requests over the level's window, from the engine's own
    ``/metrics`` (scraped by bench), as the format's batch and queue sizes."""
    out = {}
    for ours, theirs in (
        ("engine.requests_running", "batch_size"),
        ("engine.requests_waiting", "queue_size"),
    ):
        vals = [
            round(v)
            for s in result.samples
            if s.name == ours and span[0] <= s.t <= span[1] and (v := _finite(s.value)) is not None
        ]
        if vals:
            out[theirs] = _count_stats(vals)
    return out or None


def _report(
    result: RunResult, name: str, agg: Mapping[str, Any], recs: Sequence[RequestRecord]
) -> dict[str, Any] | None:
    ttft = _stats(agg.get("ttft"), "ms", 1000.0)
    if ttft is None:
        return None  # the format requires a TTFT: a level without an answer has none
    ok = [r for r in recs if r.ok]
    window = agg.get("window") or {}
    start, end = _finite(window.get("start")), _finite(window.get("end"))
    span = window.get("throughput_span") or [start, end]
    lo, hi = (_finite(span[0]), _finite(span[1])) if len(span) == 2 else (None, None)
    duration = (hi - lo) if lo is not None and hi is not None else 0.0
    wall = result.clock.wall - result.clock.monotonic  # monotonic -> Unix seconds
    tokens = agg.get("tokens") or {}
    out_tps = _finite(agg.get("output_token_throughput")) or 0.0
    in_tps = (tokens.get("prompt") or 0) / duration if duration > 0 else 0.0
    requests = agg.get("requests") or {}
    latency = {"time_to_first_token": ttft}
    for ours, theirs, units in (
        ("tpot", "time_per_output_token", "ms/token"),
        ("itl", "inter_token_latency", "ms/token"),
        ("e2e", "request_latency", "ms"),
    ):
        if (st := _stats(agg.get(ours), units, 1000.0)) is not None:
            latency[theirs] = st
    metrics: dict[str, Any] = {
        "time": {"duration": duration},
        "requests": {
            "total": int(requests.get("total", len(recs))),
            "failures": int(requests.get("errors", len(recs) - len(ok))),
            "incomplete": int(requests.get("cancelled", 0)),
            "input_length": _count_stats(
                [r.prompt_tokens for r in ok if r.prompt_tokens is not None]
            ),
            "output_length": _count_stats([r.output_tokens for r in ok]),
        },
        "latency": latency,
        "throughput": {
            "input_tokens_per_sec": in_tps,
            "output_tokens_per_sec": out_tps,
            "total_tokens_per_sec": in_tps + out_tps,
            "requests_per_sec": _finite(agg.get("request_throughput")) or 0.0,
        },
    }
    if lo is not None and hi is not None:
        metrics["time"].update(start=lo + wall, stop=hi + wall)
        if (service := _service(result, (lo, hi))) is not None:
            metrics["service"] = service
    model = result.config.get("model") or "unknown"
    scenario: dict[str, Any] = {
        "description": f"infersight {result.kind} {result.run_id}, level {name}",
        "model": {"name": str(model)},
        "load": _load(result, agg),
        "platform": {"engine": [_engine(result)]},
    }
    if (host := _host(result)) is not None:
        scenario["host"] = host
    # The verdicts whose window overlaps this level's (all of them without a window).
    verdicts = [
        v.model_dump(mode="json")
        for v in result.diagnosis
        if lo is None or hi is None or (v.window.start <= hi and v.window.end >= lo)
    ]
    rec = result.recommendation
    return {
        "version": LLMD_VERSION,
        "scenario": scenario,
        "metrics": metrics,
        "metadata": {
            "infersight": {
                "run_id": result.run_id,
                "level": name,
                "verdicts": verdicts,
                "recommendation": rec.model_dump(mode="json") if rec is not None else None,
                "validity": agg.get("validity") or [],
                "client_limited": bool(agg.get("client_limited")),
            }
        },
    }


def llmd_reports(result: RunResult) -> list[dict[str, Any]]:
    """One llm-d benchmark report per level of ``result`` that answered (in level
    order); a level without a single TTFT has no report, as the format requires one."""
    out = []
    # The report's view: each level's stored aggregate, or one computed from its records
    # (a file written without them, or imported from another tool).
    for lv in build_view(result).levels:
        if (rep := _report(result, lv.name, lv.agg, lv.records)) is not None:
            out.append(rep)
    return out


def write_llmd(result: RunResult, folder: str | Path, *, prefix: str = "") -> list[Path]:
    """Each level's report as ``FOLDER/PREFIXbenchmark_report_<level>.json``."""
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for rep in llmd_reports(result):
        level = rep["metadata"]["infersight"]["level"]
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in level)
        paths.append(write_json(out / f"{prefix}benchmark_report_{safe}.json", rep))
    return paths
