"""What a trial scored (docs/design.md section 8): the highest goodput under the SLO,
else the best sustainable throughput, from the trial's best level.

- With an SLO, the levels that met it (and were sustainable) compete on goodput; when
  none met it, the level closest to it (the smallest worst check, value over limit)
  stands for the trial, marked as missing the SLO.
- Without one, the sustainable levels compete on request throughput; when every level
  was unsustainable, the rate each completed is its capacity estimate.

The interval is the level's figure plus or minus the half-width of the 95% interval of
its time slices' mean (stats.slices): the same units the comparisons use.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from infersight.core.numbers import number_at
from infersight.core.records import RunResult
from infersight.stats.level_flags import level_state
from infersight.stats.significance import compare_metric, mean_interval, noise_floor
from infersight.stats.slices import LevelData, SliceMetric, metric_named, slice_values

__all__ = ["Scored", "aa_floor", "objective_metric", "score"]


@dataclass(frozen=True, slots=True)
class Scored:
    """A trial's objective and the level it came from."""

    level: str | None = None
    data: LevelData | None = None
    value: float | None = None
    low: float | None = None
    high: float | None = None
    slo_met: bool | None = None
    #: The level's worst SLO check, value over limit (at most 1 when met).
    margin: float | None = None
    ttft_p99: float | None = None
    tpot_p99: float | None = None


def objective_metric(slo: Mapping[str, float]) -> SliceMetric:
    """Goodput with an SLO, else request throughput."""
    return metric_named("goodput" if slo else "throughput")


def _margin(agg: Mapping[str, Any]) -> float:
    checks = (agg.get("slo") or {}).get("checks") or {}
    worst = 0.0
    for c in checks.values():
        value, limit = c.get("value"), c.get("limit")
        if value is None or not limit:
            return math.inf
        worst = max(worst, float(value) / float(limit))
    return worst


def score(
    result: RunResult, slo: Mapping[str, float], *, levels: Sequence[str] | None = None
) -> Scored:
    """The trial's objective from its RunResult's aggregates and records (from
    ``levels`` only, when given)."""
    aggs = {n: a for n, a in result.aggregates.items() if levels is None or n in levels}
    if not aggs:
        return Scored()
    steady = {n: a for n, a in aggs.items() if level_state(a) != "unsustainable"} or dict(aggs)
    if slo:
        met = {n: a for n, a in steady.items() if (a.get("slo") or {}).get("met")}
        if met:
            name = max(met, key=lambda n: number_at(met[n], "goodput") or 0.0)
        else:
            name = min(aggs, key=lambda n: _margin(aggs[n]))
        key = "goodput"
    else:
        name = max(steady, key=lambda n: number_at(steady[n], "request_throughput") or 0.0)
        key = "request_throughput"
    agg = aggs[name]
    data = LevelData([r for r in result.records if r.labels.get("level") == name], agg)
    value = number_at(agg, key)
    low = high = None
    if value is not None:
        m, lo, _ = mean_interval(slice_values(data, objective_metric(slo), slo=slo))
        if m is not None and lo is not None:
            low, high = max(0.0, value - (m - lo)), value + (m - lo)
    margin = _margin(agg) if slo else None
    return Scored(
        level=name,
        data=data,
        value=value,
        low=low,
        high=high,
        slo_met=(bool((agg.get("slo") or {}).get("met")) and name in steady) if slo else None,
        margin=None if margin is None or math.isinf(margin) else margin,
        ttft_p99=number_at(agg, "ttft", "p99"),
        tpot_p99=number_at(agg, "tpot", "p99"),
    )


def aa_floor(base: Scored, aa: Scored, slo: Mapping[str, float]) -> tuple[float, str]:
    """The noise floor the A/A pair measures, and its basis in words.

    On the objective; but a baseline that missed the SLO has a goodput made of the few
    requests that happened to meet it, whose spread is the SLO's edge, not the noise:
    its floor comes from the pair's throughput."""
    if base.data is None or aa.data is None:
        return math.inf, "the A/A pair of the baseline"
    missed = bool(slo) and not (base.slo_met and aa.slo_met)
    metric = metric_named("throughput") if missed else objective_metric(slo)
    spread = noise_floor(compare_metric([base.data], [aa.data], metric, slo=slo))
    if missed:
        return spread, (
            "the A/A pair of the baseline, on throughput (it missed the SLO: its "
            "goodput measures the SLO's edge, not the noise)"
        )
    return spread, "the A/A pair of the baseline"
