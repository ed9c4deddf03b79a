"""Whether a difference between two runs is real (docs/design.md section 2, "Comparing
runs"): the one owner of the calls ``report A B`` and ``tune`` make.

- The unit of replication is a stretch of time (:mod:`infersight.stats.slices`: the
  steady window cut into 10 equal slices), or a whole run when each side has several
  (``bench --repeat N``).
- The ratio B/A of the two means gets a 95% interval from Fieller's theorem with
  Welch's unequal-variance t (Welch-Satterthwaite degrees of freedom), so the
  uncertainty of A, the denominator, is counted too.
- The call, with a noise threshold δ (5%, or the spread an A/A pair measured): the
  interval within ±δ is "no significant difference"; wholly beyond δ, "better" or
  "worse"; anything else "inconclusive: run more".
- A p99 is only called with at least 1,000 requests a side, and an unsustainable
  level's latency is never compared: it grows with the level's length.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from infersight.core.metric_call import (
    BETTER,
    CONFIDENCE,
    DEFAULT_DELTA,
    NOT_COMPARED,
    RUN_MORE,
    SAME,
    WORSE,
    MetricCall,
)
from infersight.stats.bootstrap import quantile_ratio_interval
from infersight.stats.level_flags import level_state
from infersight.stats.slices import (
    METRICS,
    LevelData,
    SliceMetric,
    request_values,
    run_value,
    sample_count,
    slice_values,
)
from infersight.stats.validity import invalid_metrics

__all__ = [
    "BETTER",
    "DEFAULT_DELTA",
    "NOT_COMPARED",
    "P99_MIN_REQUESTS",
    "RUN_MORE",
    "SAME",
    "WORSE",
    "MetricCall",
    "compare",
    "compare_metric",
    "confidence_text",
    "decide",
    "family_confidence",
    "mean_interval",
    "noise_floor",
    "ratio_interval",
    "repeat_groups",
]

#: A measured A/A spread replaces δ, but never below this: a 0.5% change is not news.
MIN_DELTA = 0.01
#: A p99 is compared only when each side has this many requests.
P99_MIN_REQUESTS = 1000


def ratio_interval(
    a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray, confidence: float = CONFIDENCE
) -> tuple[float | None, float | None, float | None]:
    """``(mean(b)/mean(a), low, high)``: Fieller's interval for a ratio of two means with
    Welch's degrees of freedom. ``low``/``high`` are None when the interval is unbounded
    (A's mean is not clearly above 0) or a side has fewer than two values."""
    xa, xb = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if xa.size == 0 or xb.size == 0:
        return None, None, None
    ma, mb = float(xa.mean()), float(xb.mean())
    if ma == 0.0:  # rates and latencies are never negative: every value of A is 0
        return (1.0, 1.0, 1.0) if mb == 0.0 else (None, None, None)
    ratio = mb / ma
    if xa.size < 2 or xb.size < 2:
        return ratio, None, None
    va, vb = float(xa.var(ddof=1)) / xa.size, float(xb.var(ddof=1)) / xb.size
    spread = vb + ratio**2 * va
    if spread == 0.0:
        return ratio, ratio, ratio
    den = vb**2 / (xb.size - 1) + ratio**4 * va**2 / (xa.size - 1)
    df = spread**2 / den if den > 0 else math.inf
    t = _t_quantile(0.5 + confidence / 2, df)
    qa = ma**2 - t**2 * va
    if qa <= 0:
        return ratio, None, None
    disc = (ma * mb) ** 2 - qa * (mb**2 - t**2 * vb)
    root = math.sqrt(max(disc, 0.0))
    return ratio, (ma * mb - root) / qa, (ma * mb + root) / qa


def _t_quantile(p: float, df: float) -> float:
    """Student's t quantile. scipy.stats is imported here, not at the top: importing it
    takes ~1.3 s and tens of MiB, and every bench run imports this module but few compare
    runs."""
    from scipy import stats

    return float(stats.t.ppf(p, df))


def mean_interval(
    values: Sequence[float] | np.ndarray, confidence: float = CONFIDENCE
) -> tuple[float | None, float | None, float | None]:
    """The mean and its t interval (None bounds with fewer than two values)."""
    x = np.asarray(values, dtype=np.float64)
    if x.size == 0:
        return None, None, None
    m = float(x.mean())
    if x.size < 2:
        return m, None, None
    half = _t_quantile(0.5 + confidence / 2, x.size - 1) * float(x.std(ddof=1)) / math.sqrt(x.size)
    return m, m - half, m + half


def decide(low: float | None, high: float | None, better: str, delta: float) -> str:
    """The call for a B/A interval: within ±δ, wholly beyond it, or neither."""
    if low is None or high is None:
        return RUN_MORE
    if low >= 1.0 - delta and high <= 1.0 + delta:
        return SAME
    if low > 1.0 + delta:
        return BETTER if better == "higher" else WORSE
    if high < 1.0 - delta:
        return WORSE if better == "higher" else BETTER
    return RUN_MORE


def _mean_of(side: Sequence[LevelData], key: str) -> float:
    vals = [v for lv in side if isinstance(v := lv.agg.get(key), int | float)]
    return float(np.mean(vals)) if vals else 0.0


def _unsustainable(side: Sequence[LevelData]) -> bool:
    return any(level_state(dict(lv.agg)) == "unsustainable" for lv in side)


def _sustained(side: Sequence[LevelData]) -> list[LevelData]:
    return [lv for lv in side if level_state(dict(lv.agg)) != "unsustainable"]


#: The aggregate key a rate metric's validity is judged under (latencies: their source).
_VALIDITY_KEY = {
    "tokens": "output_token_throughput",
    "good": "goodput",
    "requests": "request_throughput",
}


def _invalid(a: Sequence[LevelData], b: Sequence[LevelData], metric: SliceMetric) -> str:
    """Why either side marks the metric invalid (docs/design.md section 2), or "";
    each side that does is named with its first reason."""
    key = _VALIDITY_KEY.get(metric.source, metric.source)
    said = []
    for who, side in (("A", a), ("B", b)):
        why = next((w for lv in side if (w := invalid_metrics(dict(lv.agg)).get(key))), None)
        if why:
            said.append(f"{who} marks it invalid ({why})")
    return "; ".join(said)


def compare_metric(
    a: Sequence[LevelData],
    b: Sequence[LevelData],
    metric: SliceMetric,
    *,
    delta: float = DEFAULT_DELTA,
    slo: Mapping[str, float] | None = None,
    confidence: float = CONFIDENCE,
) -> MetricCall:
    """B against A on one metric. Each side is one level of one run, or the same level
    of several runs (``--repeat``): with at least two runs a side, runs are the units."""
    runs = len(a) >= 2 and len(b) >= 2
    out = MetricCall(
        metric=metric.name,
        label=metric.label,
        better=metric.better,
        delta=delta,
        confidence=confidence,
        basis="runs" if runs else "slices",
    )
    notes: list[str] = []
    if metric.kind == "latency" and (_unsustainable(a) or _unsustainable(b)):
        # With runs as units, an unsustainable run is left out; the rest still compare.
        a, b = _sustained(a), _sustained(b)
        if not runs or len(a) < 2 or len(b) < 2:
            out.call = NOT_COMPARED
            out.note = "a level is unsustainable: its latency grows with the level's length"
            return out
        notes.append("unsustainable runs left out")
    if why := _invalid(a, b, metric):
        out.call, out.note = NOT_COMPARED, why
        return out
    out.requests = (
        sum(sample_count(lv, metric) for lv in a),
        sum(sample_count(lv, metric) for lv in b),
    )

    def units(side: Sequence[LevelData]) -> np.ndarray:
        if runs:
            vals = [run_value(lv, metric, slo=slo) for lv in side]
            return np.asarray([v for v in vals if v is not None], dtype=np.float64)
        parts = [slice_values(lv, metric, slo=slo) for lv in side]
        return np.concatenate(parts) if parts else np.empty(0)

    ua, ub = units(a), units(b)
    out.units = (int(ua.size), int(ub.size))
    out.a = float(ua.mean()) if ua.size else None
    out.b = float(ub.mean()) if ub.size else None
    out.ratio, out.low, out.high = ratio_interval(ua, ub, confidence)
    if not runs and metric.kind == "latency" and metric.source != "itl":
        # A percentile: bootstrap over requests, each side at its own size.
        ra = np.concatenate([request_values(lv, metric) for lv in a])
        rb = np.concatenate([request_values(lv, metric) for lv in b])
        out.basis, out.units = "requests", (int(ra.size), int(rb.size))
        out.ratio, out.low, out.high = quantile_ratio_interval(
            ra, rb, metric.q, confidence=confidence
        )
        if ra.size and rb.size:
            out.a, out.b = float(np.percentile(ra, metric.q)), float(np.percentile(rb, metric.q))
    out.call = decide(out.low, out.high, metric.better, delta)
    if out.a == 0.0 and ub.size >= 2 and (mean_interval(ub, confidence)[1] or 0.0) > 0.0:
        # From nothing to something (goodput where no request met the SLO before): no
        # ratio, so the smallest difference that matters is δ of B's request rate.
        floor = delta * _mean_of(b, "request_throughput")
        if (mean_interval(ub, confidence)[1] or 0.0) > floor:
            out.call = BETTER if metric.better == "higher" else WORSE
            notes.append("A is 0 in every unit; B is above 0")
        else:
            out.call = SAME
            notes.append(f"A is 0; B is within δ ({delta:.0%}) of its request rate")
    elif min(out.units) < 2:
        notes.append(f"too few {out.basis} with values (A {out.units[0]}, B {out.units[1]})")
    elif metric.q >= 99 and metric.kind == "latency" and min(out.requests) < P99_MIN_REQUESTS:
        out.call = RUN_MORE
        notes.append(
            f"a p99 is called only with {P99_MIN_REQUESTS:,} requests a side "
            f"(A {out.requests[0]:,}, B {out.requests[1]:,})"
        )
    elif out.call == RUN_MORE and out.low is None:
        notes.append("the interval is unbounded: A's values are too close to 0 or too spread")
    out.note = "; ".join(notes)
    return out


def compare(
    a: Sequence[LevelData],
    b: Sequence[LevelData],
    *,
    delta: float = DEFAULT_DELTA,
    slo: Mapping[str, float] | None = None,
    metrics: Sequence[SliceMetric] | None = None,
    confidence: float = CONFIDENCE,
) -> list[MetricCall]:
    """Every metric of B against A (goodput only with an SLO)."""
    chosen = metrics if metrics is not None else [m for m in METRICS if m.name != "goodput" or slo]
    return [compare_metric(a, b, m, delta=delta, slo=slo, confidence=confidence) for m in chosen]


def family_confidence(comparisons: int, confidence: float = CONFIDENCE) -> float:
    """The confidence of each interval when ``comparisons`` runs are each compared with
    one baseline (``report A B C``): Bonferroni's, the first step of Holm's method, so
    that the chance of any false call among them stays within ``1 - confidence``
    (docs/design.md section 2)."""
    return 1.0 - (1.0 - confidence) / max(1, comparisons)


def confidence_text(comparisons: int) -> str:
    """``95%``, or ``97.5% first (2 runs against one baseline: Holm)``."""
    pct = f"{family_confidence(comparisons) * 100:.4g}%"
    return (
        pct
        if comparisons <= 1
        else (f"{pct} first ({comparisons} runs against one baseline: Holm)")
    )


def noise_floor(aa: MetricCall, minimum: float = MIN_DELTA) -> float:
    """δ measured by an A/A pair: how far its B/A interval reaches from 1 (infinite when
    the interval is unbounded), never below ``minimum``."""
    if aa.low is None or aa.high is None:
        return math.inf
    return max(minimum, 1.0 - aa.low, aa.high - 1.0)


def repeat_groups(levels: Sequence[Mapping[str, Any]]) -> dict[str, list[str]]:
    """A run's levels (``RunResult.config["levels"]``) grouped by the level they repeat:
    ``{"c=4": ["c=4#1", "c=4#2"]}``; a level without repeats is its own group."""
    groups: dict[str, list[str]] = {}
    for lv in levels:
        name = lv.get("name")
        if name is None:
            continue
        base = lv.get("repeat_of") or name
        groups.setdefault(str(base), []).append(str(name))
    return groups
