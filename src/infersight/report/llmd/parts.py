"""What both lines of llm-d-benchmark's benchmark report take from a RunResult level:
its span, its figures as the format's statistics keys, the load and the engine's flags,
the engine's gauges over the level, and what the format has no field for.

The writers (``report.llmd.v02`` for 0.2.1, ``report.llmd.v01`` for 0.1) build the
package's own models from these; docs/design.md section 2 ("Export") maps each field.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from infersight.core.numbers import as_float
from infersight.core.records import RequestRecord, RunResult
from infersight.report.view import build_view

__all__ = [
    "LevelPart",
    "count_stats",
    "engine_args",
    "engine_gauges",
    "engine_name",
    "level_parts",
    "load_args",
    "stat_values",
    "verdict_metadata",
]

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
#: Our engine gauges (telemetry sample names) that the format also names.
ENGINE_GAUGES = ("engine.requests_running", "engine.requests_waiting", "engine.kv_cache_usage")
#: The workload's flags a report's load carries, when set.
_LOAD_FLAGS = (
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


def stat_values(agg: Any, scale: float = 1.0) -> dict[str, float] | None:
    """One of our summaries (``{"mean", "std", "p50", ...}``) under the format's keys,
    times ``scale``; None without a mean (nothing measured)."""
    if not isinstance(agg, Mapping) or as_float(agg.get("mean")) is None:
        return None
    out: dict[str, float] = {}
    for ours, theirs in _STAT_KEYS:
        v = as_float(agg.get(ours))
        if v is not None:
            out[theirs] = max(v * scale, 0.0) if theirs == "stddev" else v * scale
    return out


def count_stats(values: Sequence[float]) -> dict[str, float]:
    """Mean, stddev, min, p10/p50/p90/p99 and max of counts (empty: a mean of 0)."""
    x = np.asarray(values, dtype=np.float64)
    if x.size == 0:
        return {"mean": 0.0}
    q = np.percentile(x, [10, 50, 90, 99])
    return {
        "mean": float(x.mean()),
        "stddev": float(x.std()),
        "min": float(x.min()),
        "p10": float(q[0]),
        "p50": float(q[1]),
        "p90": float(q[2]),
        "p99": float(q[3]),
        "max": float(x.max()),
    }


@dataclass(frozen=True)
class LevelPart:
    """One level of a run, as a report describes it (times in the run's monotonic
    seconds; ``wall`` turns them into Unix seconds)."""

    index: int
    name: str
    agg: Mapping[str, Any]
    records: Sequence[RequestRecord]
    #: The level's throughput span (its window and drain), or None without a window.
    span: tuple[float, float] | None
    wall: float

    @property
    def duration(self) -> float:
        return self.span[1] - self.span[0] if self.span is not None else 0.0

    @property
    def ok(self) -> list[RequestRecord]:
        return [r for r in self.records if r.ok]

    @property
    def input_tokens_per_s(self) -> float:
        prompt = as_float((self.agg.get("tokens") or {}).get("prompt")) or 0.0
        return prompt / self.duration if self.duration > 0 else 0.0


def level_parts(result: RunResult) -> list[LevelPart]:
    """Every level of ``result`` that has a TTFT (a report requires one), in order;
    each level's stored aggregate, or one computed from its records."""
    wall = result.clock.wall - result.clock.monotonic  # monotonic -> Unix seconds
    out = []
    for i, lv in enumerate(build_view(result).levels):
        if stat_values(lv.agg.get("ttft")) is None:
            continue  # a level without an answer has no TTFT
        window = lv.agg.get("window") or {}
        span = window.get("throughput_span") or [window.get("start"), window.get("end")]
        lo, hi = (as_float(span[0]), as_float(span[1])) if len(span) == 2 else (None, None)
        out.append(
            LevelPart(
                index=i,
                name=lv.name,
                agg=lv.agg,
                records=lv.records,
                span=(lo, hi) if lo is not None and hi is not None else None,
                wall=wall,
            )
        )
    return out


def load_args(result: RunResult, part: LevelPart) -> dict[str, Any]:
    """The load of this one point: the level's own rate or concurrency, and the
    workload's flags as set."""
    target = part.agg.get("target") or {}
    point = {k: target[k] for k in ("rate", "concurrency") if target.get(k) is not None}
    cfg = result.config
    return {**point, **{k: cfg[k] for k in _LOAD_FLAGS if cfg.get(k) not in (None, [], "")}}


def engine_name(result: RunResult) -> tuple[str, str | None]:
    """The engine's name (``unknown`` when the run does not say) and its version."""
    engine = result.config.get("engine")
    name = engine.get("engine") if isinstance(engine, Mapping) else None
    version = result.versions.get("xllamacpp") if name in (None, "llamacpp") else None
    return str(name or "unknown"), version


def engine_args(result: RunResult) -> dict[str, Any]:
    """The engine's flags: the embedded engine's, and a tune trial's setting."""
    args: dict[str, Any] = {
        f"--{k.removeprefix('engine_')}": result.config[k]
        for k in ("engine_parallel", "engine_ctx", "engine_slots")
        if result.config.get(k) is not None
    }
    setting = result.config.get("tune_setting")
    if isinstance(setting, Mapping):
        args.update({f"--{k}": v for k, v in setting.items()})
    return args


def engine_gauges(result: RunResult, span: tuple[float, float] | None) -> dict[str, list[Any]]:
    """Each of :data:`ENGINE_GAUGES` the engine exported over ``span`` (every sample
    without a span), as ``[(t, value), ...]`` in the run's monotonic seconds."""
    out: dict[str, list[Any]] = {}
    for s in result.samples:
        inside = span is None or span[0] <= s.t <= span[1]
        if s.name in ENGINE_GAUGES and inside and (v := as_float(s.value)) is not None:
            out.setdefault(s.name, []).append((s.t, v))
    return out


def verdict_metadata(result: RunResult, part: LevelPart) -> dict[str, Any]:
    """What the format has no field for: the verdicts overlapping the level (all of
    them without a window), the recommendation, the validity checks, the level's
    client-limited flag."""
    lo, hi = part.span if part.span is not None else (None, None)
    verdicts = [
        v.model_dump(mode="json")
        for v in result.diagnosis
        if lo is None or hi is None or (v.window.start <= hi and v.window.end >= lo)
    ]
    rec = result.recommendation
    return {
        "run_id": result.run_id,
        "level": part.name,
        "verdicts": verdicts,
        "recommendation": rec.model_dump(mode="json") if rec is not None else None,
        "validity": list(part.agg.get("validity") or []),
        # The level's client-limited flag as bench judged it (lag and CPU): a report
        # keeps no schedule lag, so a reader takes the flag from here.
        "client_limited": dict(part.agg.get("client_limited") or {}),
    }
