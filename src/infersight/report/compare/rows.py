"""Before/after comparison of several runs: the rows, deltas and the calls.

The first result is the baseline; every other one is compared with it. Levels are
matched on their load and workload (:mod:`infersight.report.compare.match`; the runs
of a level ``bench --repeat`` ran again count together); a level without a match is
listed as not comparable, never pooled. Whether a change is real is
:mod:`infersight.stats.significance`'s call (docs/design.md section 2): each row with a
statistical basis carries it; the others (success rate, cost, utilisation) show their
change without a call.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from infersight.core.numbers import number_at
from infersight.report.compare.match import match_levels
from infersight.report.svg.charts import fmt_value
from infersight.report.view import LevelView, RunView
from infersight.stats.significance import (
    BETTER,
    DEFAULT_DELTA,
    SAME,
    WORSE,
    MetricCall,
    compare,
    family_confidence,
    repeat_groups,
)
from infersight.stats.slices import METRICS, LevelData

__all__ = [
    "CALL_CLASS",
    "CompareRow",
    "comparison_rows",
    "delta",
    "fmt_delta",
    "level_calls",
    "matched_rows",
    "unmatched_levels",
]

#: The CSS class (and Markdown mark) of each call.
CALL_CLASS = {BETTER: "better", WORSE: "worse", SAME: "same"}


@dataclass
class CompareRow:
    """One metric across runs. ``better`` is "lower", "higher" or None (neutral);
    ``calls`` holds, for each run after the baseline, whether its change is real
    (None: the metric has no statistical basis, e.g. cost)."""

    metric: str
    unit: str
    better: str | None
    values: list[float | None]
    calls: list[MetricCall | None] = field(default_factory=list)

    def call(self, i: int) -> MetricCall | None:
        """The call of the ``i``-th value (1 = the first run after the baseline)."""
        return self.calls[i - 1] if 0 < i <= len(self.calls) else None


def delta(base: float | None, new: float | None) -> tuple[float | None, float | None]:
    """(absolute, percent) change from ``base`` to ``new``; percent None when base is 0."""
    if base is None or new is None or not (math.isfinite(base) and math.isfinite(new)):
        return None, None
    d = new - base
    return d, (d / abs(base) * 100.0) if base != 0 else None


def fmt_delta(d: float | None, unit: str) -> str:
    """Signed absolute change: fractions in percentage points, money in dollars."""
    if d is None or not math.isfinite(d):
        return "-"
    sign = "+" if d > 0 else "-" if d < 0 else "±"
    if unit == "frac":
        return f"{sign}{abs(d) * 100:.3g} pp"
    if unit == "$":
        return f"{sign}${abs(d):,.4g}"
    return sign + fmt_value(abs(d), unit)


_METRICS: list[tuple[str, str, str | None, Callable[[LevelView], float | None]]] = [
    ("output tok/s", "", "higher", lambda lv: number_at(lv.agg, "output_token_throughput")),
    ("requests/s", "", "higher", lambda lv: number_at(lv.agg, "request_throughput")),
    ("success rate", "frac", "higher", lambda lv: number_at(lv.agg, "success_rate")),
    ("TTFT p50", "s", "lower", lambda lv: number_at(lv.agg, "ttft", "p50")),
    ("TTFT p99", "s", "lower", lambda lv: number_at(lv.agg, "ttft", "p99")),
    ("ITL p99", "s", "lower", lambda lv: number_at(lv.agg, "itl", "p99")),
    ("TPOT p99", "s", "lower", lambda lv: number_at(lv.agg, "tpot", "p99")),
    ("e2e p50", "s", "lower", lambda lv: number_at(lv.agg, "e2e", "p50")),
    ("e2e p99", "s", "lower", lambda lv: number_at(lv.agg, "e2e", "p99")),
]

_COST = [
    ("$ per run", "$", "usd"),
    ("$ per Mtok out", "$", "usd_per_million_output_tokens"),
    ("$ per day", "$", "projected_usd_per_day"),
]


def _groups(view: RunView) -> dict[str, list[LevelView]]:
    """The run's levels by the level they repeat (one each without ``--repeat``)."""
    by_name = {lv.name: lv for lv in view.levels}
    out: dict[str, list[LevelView]] = {}
    for base, names in repeat_groups(view.result.config.get("levels") or []).items():
        got = [by_name[n] for n in names if n in by_name]
        if got:
            out[base] = got
    for lv in view.levels:  # levels the config does not list
        if not any(lv in g for g in out.values()):
            out[lv.name] = [lv]
    return out


def compare_groups(views: Sequence[RunView]) -> list[tuple[str, list[list[LevelView]]]]:
    """Levels matched across runs (:mod:`infersight.report.compare.match`: the same load
    and workload): for each level, each run's runs of it."""
    return match_levels([_groups(v) for v in views])[0]


def unmatched_levels(views: Sequence[RunView]) -> list[str]:
    """Every level no level of another run matches: "not comparable: different load"
    (or workload), one line each; these are never pooled (docs/design.md section 2)."""
    labels = [v.label for v in views]
    return [u.text(labels) for u in match_levels([_groups(v) for v in views])[1]]


def _mean_agg(aggs: Sequence[Any]) -> Any:
    """The mean of the numbers several runs' aggregates share, key by key."""
    first = aggs[0]
    if isinstance(first, dict):
        keys = [k for k in first if all(isinstance(a, dict) and k in a for a in aggs)]
        return {k: _mean_agg([a[k] for a in aggs]) for k in keys}
    if all(isinstance(a, int | float) and not isinstance(a, bool) for a in aggs):
        return float(np.mean(aggs))
    return first


def merged_level(name: str, runs: Sequence[LevelView]) -> LevelView:
    """One level for the tables and CDFs: the level itself, or its repeats as one (the
    mean of their figures; the CDFs pool the requests of their windows)."""
    if len(runs) == 1:
        return runs[0]
    recs = [r for lv in runs for r, m in zip(lv.records, lv.in_stats(), strict=True) if m]
    agg = _mean_agg([lv.agg for lv in runs])
    agg["window"] = {"steady": False, "note": f"the mean of {len(runs)} runs"}
    agg["repeats"] = len(runs)
    merged = LevelView(name, recs, agg, (runs[0].span[0], runs[-1].span[1]))
    costs = [lv.cost for lv in runs if lv.cost]
    if len(costs) == len(runs):
        merged.cost = _mean_agg(costs)
    return merged


def matched_rows(
    views: Sequence[RunView], *, threshold: float = DEFAULT_DELTA
) -> list[tuple[str, list[LevelView], list[CompareRow]]]:
    """Every matched level: its level per run (repeats merged) and its rows with calls."""
    out = []
    for name, runs in compare_groups(views):
        levels = [merged_level(name, g) for g in runs]
        out.append((name, levels, comparison_rows(levels, level_calls(runs, threshold=threshold))))
    return out


def level_calls(
    runs: Sequence[Sequence[LevelView]], *, threshold: float = DEFAULT_DELTA
) -> list[dict[str, MetricCall]]:
    """For each run after the baseline: its calls against the baseline, by row label.

    Several runs against one baseline are a family of comparisons per metric, adjusted
    by Holm's step-down method (docs/design.md section 2): every interval starts at
    1 − 0.05/k for k runs; a difference called at that confidence is kept, and the
    others are tried again at 1 − 0.05/(k − called), until no new call is made. Only
    "better" or "worse" is taken from a later step: "no significant difference" stays
    the verdict of the widest interval.
    """

    def data(side: Sequence[LevelView]) -> list[LevelData]:
        return [LevelData(lv.records, lv.agg) for lv in side]

    base, others = data(runs[0]), [data(g) for g in runs[1:]]
    out: list[dict[str, MetricCall]] = [{} for _ in others]
    for metric in (m for m in METRICS if m.name != "goodput"):
        pending, first = list(range(len(others))), True
        while pending:
            conf = family_confidence(len(pending))
            step = {
                i: compare(base, others[i], delta=threshold, confidence=conf, metrics=[metric])[0]
                for i in pending
            }
            called = [i for i, c in step.items() if c.call in (BETTER, WORSE)]
            for i, c in step.items():
                if first or i in called:
                    out[i][c.label] = c
            if not called or len(called) == len(pending):
                break
            pending, first = [i for i in pending if i not in called], False
    return out


def comparison_rows(
    levels: Sequence[LevelView], calls: Sequence[dict[str, MetricCall]] = ()
) -> list[CompareRow]:
    """Rows of the before/after table for one set of matched levels (baseline first),
    with the calls of :func:`level_calls` where a row has one."""
    rows = [
        CompareRow(m, unit, better, [f(lv) for lv in levels], [c.get(m) for c in calls])
        for m, unit, better, f in _METRICS
    ]
    for name in sorted({k for lv in levels for k in lv.util}):
        rows.append(CompareRow(f"{name} mean", "%", None, [lv.util.get(name) for lv in levels]))
    if any(lv.cost for lv in levels):
        for label, unit, key in _COST:
            vals = [(lv.cost or {}).get(key) for lv in levels]
            if any(v is not None and math.isfinite(v) for v in vals):
                rows.append(CompareRow(label, unit, "lower", vals))
    return [r for r in rows if any(v is not None for v in r.values)]
