"""Before/after comparison of several runs: the rows, deltas and better/worse calls.

The first result is the baseline; every other one is compared with it. Levels with the
same name are compared with each other; when the runs share no level name, each run's
records are pooled into one "all" level.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from infersight.report.svg import fmt_value
from infersight.report.view import LevelView, RunView, level_aggregate, record_end

__all__ = [
    "CompareRow",
    "compare_levels",
    "comparison_rows",
    "delta",
    "fmt_delta",
    "judge",
    "pooled_level",
]

#: Relative change under which a difference is called "same" rather than better/worse.
SAME_TOLERANCE = 0.01


@dataclass
class CompareRow:
    """One metric across runs. ``better`` is "lower", "higher" or None (neutral)."""

    metric: str
    unit: str
    better: str | None
    values: list[float | None]


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


def judge(better: str | None, base: float | None, new: float | None) -> str | None:
    """ "better", "worse" or "same" for a change, None when not comparable or neutral."""
    d, pct = delta(base, new)
    if d is None or better is None:
        return None
    if d == 0 or (pct is not None and abs(pct) < SAME_TOLERANCE * 100):
        return "same"
    improved = d < 0 if better == "lower" else d > 0
    return "better" if improved else "worse"


def _get(agg: dict[str, Any], *path: str) -> float | None:
    cur: Any = agg
    for p in path:
        if not isinstance(cur, dict):
            return None
        cur = cur.get(p)
    return float(cur) if isinstance(cur, int | float) and not isinstance(cur, bool) else None


_METRICS: list[tuple[str, str, str | None, Callable[[LevelView], float | None]]] = [
    ("output tok/s", "", "higher", lambda lv: _get(lv.agg, "output_token_throughput")),
    ("requests/s", "", "higher", lambda lv: _get(lv.agg, "request_throughput")),
    ("success rate", "frac", "higher", lambda lv: _get(lv.agg, "success_rate")),
    ("TTFT p50", "s", "lower", lambda lv: _get(lv.agg, "ttft", "p50")),
    ("TTFT p99", "s", "lower", lambda lv: _get(lv.agg, "ttft", "p99")),
    ("ITL p99", "s", "lower", lambda lv: _get(lv.agg, "itl", "p99")),
    ("TPOT p99", "s", "lower", lambda lv: _get(lv.agg, "tpot", "p99")),
    ("e2e p50", "s", "lower", lambda lv: _get(lv.agg, "e2e", "p50")),
    ("e2e p99", "s", "lower", lambda lv: _get(lv.agg, "e2e", "p99")),
]

_COST = [
    ("$ per run", "$", "usd"),
    ("$ per Mtok out", "$", "usd_per_million_output_tokens"),
    ("$ per day", "$", "projected_usd_per_day"),
]


def pooled_level(view: RunView) -> LevelView:
    """The run's only level, or all its records pooled into one level named "all"."""
    if len(view.levels) == 1:
        return view.levels[0]
    recs = [r for lv in view.levels for r in lv.records]
    span = (
        (min(r.scheduled for r in recs) - view.t0, max(record_end(r) for r in recs) - view.t0)
        if recs
        else (0.0, 0.0)
    )
    pooled = LevelView("all", recs, level_aggregate(None, recs), span)
    costs = [lv.cost for lv in view.levels if lv.cost]
    if costs and "usd" in costs[0]:
        run = sum(c.get("usd") or 0.0 for c in costs)
        out = sum(int(_get(lv.agg, "tokens", "output") or 0) for lv in view.levels)
        pooled.cost = {"usd": run, "usd_per_million_output_tokens": run / out * 1e6 if out else None}
    for name in {k for lv in view.levels for k in lv.util}:
        vals = [lv.util[name] for lv in view.levels if name in lv.util]
        pooled.util[name] = float(np.mean(vals))
    return pooled


def compare_levels(views: Sequence[RunView]) -> list[tuple[str, list[LevelView]]]:
    """Pairs up levels across runs: shared level names, else each run pooled."""
    names = [lv.name for lv in views[0].levels]
    shared = [n for n in names if all(any(lv.name == n for lv in v.levels) for v in views[1:])]
    if shared:
        return [(n, [next(lv for lv in v.levels if lv.name == n) for v in views]) for n in shared]
    return [("all levels pooled", [pooled_level(v) for v in views])]


def comparison_rows(levels: Sequence[LevelView]) -> list[CompareRow]:
    """Rows of the before/after table for one set of matched levels (baseline first)."""
    rows = [
        CompareRow(m, unit, better, [f(lv) for lv in levels]) for m, unit, better, f in _METRICS
    ]
    for name in sorted({k for lv in levels for k in lv.util}):
        rows.append(CompareRow(f"{name} mean", "%", None, [lv.util.get(name) for lv in levels]))
    if any(lv.cost for lv in levels):
        for label, unit, key in _COST:
            vals = [(lv.cost or {}).get(key) for lv in levels]
            if any(v is not None and math.isfinite(v) for v in vals):
                rows.append(CompareRow(label, unit, "lower", vals))
    return [r for r in rows if any(v is not None for v in r.values)]
