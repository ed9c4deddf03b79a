"""A level's steady window cut into equal time slices (batch means; docs/design.md
section 2, "Comparing runs").

The requests of one run are correlated (they share a batch and a queue), so an interval
from resampling requests is far too narrow. The unit of replication is a stretch of
time instead: the window is cut into :data:`SLICES` equal slices and each metric is
computed per slice, giving ten or so nearly independent values to compare.

- **Rates** (requests/s, goodput, output tokens/s): each answered request's completion
  is spread evenly over its time in service (from when it was sent to its end), and a
  slice counts the share that fell inside it. A closed loop whose requests finish
  together then does not make one slice hold every completion and the next none; over
  the whole window the count is the same.
- **Latency percentiles**: the requests *scheduled* in a slice, as the window itself
  chooses them (by intended send time), with TTFT over every request that got a first
  token and TPOT, e2e and pooled ITL over complete answers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from infersight.core.records import RequestRecord
from infersight.stats.aggregate import meets_slo
from infersight.stats.chunks import FloatArray, pooled_itl
from infersight.stats.summary import summarize

__all__ = [
    "METRICS",
    "LevelData",
    "SliceMetric",
    "metric_named",
    "request_values",
    "run_value",
    "sample_count",
    "slice_values",
]

#: Slices a window is cut into (design section 2: at least 10).
SLICES = 10
#: A slice's percentile needs this many values; emptier slices are left out.
_MIN_PER_SLICE = 2


@dataclass(frozen=True, slots=True)
class SliceMetric:
    """A metric the comparison knows: how to compute it and which way is better."""

    name: str
    label: str
    better: Literal["higher", "lower"]
    kind: Literal["rate", "latency"]
    #: Rates: "requests", "good" (requests within the SLO) or "tokens". Latency: the
    #: per-request attribute ("ttft", "tpot", "e2e") or "itl" (pooled, token-weighted).
    source: str
    #: Latency percentile in percent (50, 99).
    q: float = 50.0


METRICS: tuple[SliceMetric, ...] = (
    SliceMetric("throughput", "requests/s", "higher", "rate", "requests"),
    SliceMetric("token_throughput", "output tok/s", "higher", "rate", "tokens"),
    SliceMetric("goodput", "goodput", "higher", "rate", "good"),
    SliceMetric("ttft_p50", "TTFT p50", "lower", "latency", "ttft", 50.0),
    SliceMetric("ttft_p99", "TTFT p99", "lower", "latency", "ttft", 99.0),
    SliceMetric("tpot_p50", "TPOT p50", "lower", "latency", "tpot", 50.0),
    SliceMetric("tpot_p99", "TPOT p99", "lower", "latency", "tpot", 99.0),
    SliceMetric("itl_p99", "ITL p99", "lower", "latency", "itl", 99.0),
    SliceMetric("e2e_p50", "e2e p50", "lower", "latency", "e2e", 50.0),
    SliceMetric("e2e_p99", "e2e p99", "lower", "latency", "e2e", 99.0),
)
_BY_NAME = {m.name: m for m in METRICS}


def metric_named(name: str) -> SliceMetric:
    """The metric called ``name`` ("throughput", "ttft_p99", ...)."""
    return _BY_NAME[name]


@dataclass(frozen=True, slots=True)
class LevelData:
    """One level of one run: all its records and its aggregate (for the window)."""

    records: Sequence[RequestRecord]
    agg: Mapping[str, Any]

    def bounds(self) -> tuple[float, float] | None:
        """The window's (start, end) in intended send time, None when it spans no time."""
        w = self.agg.get("window") or {}
        lo, hi = w.get("start"), w.get("end")
        if not isinstance(lo, int | float) or not isinstance(hi, int | float) or hi <= lo:
            return None
        return float(lo), float(hi)

    def members(self) -> list[RequestRecord]:
        """The requests scheduled inside the window."""
        b = self.bounds()
        if b is None:
            return list(self.records)
        return [r for r in self.records if b[0] <= r.scheduled <= b[1]]


def _rate_slices(
    level: LevelData, source: str, edges: FloatArray, slo: Mapping[str, float] | None
) -> FloatArray:
    recs = [r for r in level.records if r.ok and r.end is not None]
    if source == "good":
        recs = [r for r in recs if meets_slo(r, dict(slo or {}))]
    width = float(edges[1] - edges[0])
    if not recs:
        return np.zeros(edges.size - 1)
    start = np.array([r.sent if r.sent is not None else r.scheduled for r in recs])
    end = np.array([r.end for r in recs], dtype=np.float64)
    weight = np.array(
        [float(r.output_tokens) if source == "tokens" else 1.0 for r in recs], dtype=np.float64
    )
    lo, hi = edges[:-1][None, :], edges[1:][None, :]
    dur = (end - start)[:, None]
    overlap = np.clip(np.minimum(end[:, None], hi) - np.maximum(start[:, None], lo), 0.0, None)
    # An answer that took no time counts whole in the slice where it ended.
    instant = (dur <= 0) & (end[:, None] >= lo) & (end[:, None] < hi)
    share = np.where(dur > 0, overlap / np.where(dur > 0, dur, 1.0), instant.astype(float))
    return np.asarray((share * weight[:, None]).sum(axis=0) / width, dtype=np.float64)


def _latency_values(recs: Sequence[RequestRecord], metric: SliceMetric) -> FloatArray:
    if metric.source == "itl":
        vals, weights = pooled_itl([r for r in recs if r.ok])
        if vals.size < _MIN_PER_SLICE:
            return np.empty(0)
        return np.asarray([summarize(vals, weights)[f"p{metric.q:g}"]])
    pool = recs if metric.source == "ttft" else [r for r in recs if r.ok]
    got = [v for r in pool if (v := getattr(r, metric.source)) is not None]
    return np.asarray(got, dtype=np.float64)


def _percentile(recs: Sequence[RequestRecord], metric: SliceMetric) -> float:
    vals = _latency_values(recs, metric)
    if metric.source == "itl":
        return float(vals[0]) if vals.size else float("nan")
    if vals.size < _MIN_PER_SLICE:
        return float("nan")
    return float(np.percentile(vals, metric.q))


def slice_values(
    level: LevelData,
    metric: SliceMetric,
    *,
    slo: Mapping[str, float] | None = None,
    slices: int = SLICES,
) -> FloatArray:
    """The metric in each of ``slices`` equal slices of the level's window; slices
    without enough requests for a percentile are left out (no NaN is returned)."""
    b = level.bounds()
    if b is None:
        return np.empty(0)
    edges = np.linspace(b[0], b[1], slices + 1)
    if metric.kind == "rate":
        return _rate_slices(level, metric.source, edges, slo)
    members = level.members()
    idx = (
        np.clip(
            ((np.array([r.scheduled for r in members]) - b[0]) / (edges[1] - edges[0])).astype(int),
            0,
            slices - 1,
        )
        if members
        else np.empty(0, dtype=int)
    )
    out = [
        _percentile([r for r, i in zip(members, idx, strict=True) if i == k], metric)
        for k in range(slices)
    ]
    arr = np.asarray(out, dtype=np.float64)
    return arr[np.isfinite(arr)]


def run_value(
    level: LevelData, metric: SliceMetric, *, slo: Mapping[str, float] | None = None
) -> float | None:
    """The metric over the level's whole window (one run's value, for ``--repeat``)."""
    if metric.kind == "rate":
        vals = slice_values(level, metric, slo=slo, slices=1)
        return float(vals[0]) if vals.size else None
    value = _percentile(level.members(), metric)
    return value if np.isfinite(value) else None


def request_values(level: LevelData, metric: SliceMetric) -> FloatArray:
    """A latency metric's per-request values over the window (ITL: none, it is pooled)."""
    if metric.kind != "latency" or metric.source == "itl":
        return np.empty(0)
    return _latency_values(level.members(), metric)


def sample_count(level: LevelData, metric: SliceMetric) -> int:
    """How many requests the metric's statistics rest on (for the p99 rule)."""
    members = level.members()
    if metric.kind == "rate" or metric.source == "ttft":
        return len(members)
    return sum(1 for r in members if r.ok)
