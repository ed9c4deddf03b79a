"""The best operating point of a run (docs/design.md section 5, "One recommendation per
run").

It is the knee: among the levels that count (some successes, sustainable, not
client-limited beyond a marginal flag), the one with the lowest latency whose throughput
is within 5% of the best. The level at the measured knee counts as within, since past
it throughput grows by less than 10% per doubling of work (it counts even when its
client-limited flag is set: the levels past it measured the knee). An unsteady level ("no
steady state") is picked only when no steady level is in that set. ``diagnose`` stores
the pick in the capacity curve; the outputs' headline picks the same way, also among
the levels meeting each SLO goal.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from infersight.core.numbers import as_float
from infersight.stats.level_flags import flagged, level_state

__all__ = ["WITHIN", "best_level", "counts", "growth_per_doubling"]

#: A level within this fraction of the best throughput is as good as the best.
WITHIN = 0.05


def growth_per_doubling(x0: float, y0: float, x1: float, y1: float) -> float:
    """Relative growth of ``y`` per doubling of ``x`` between two points (x1 > x0 > 0)."""
    if x0 <= 0 or y0 <= 0 or x1 <= x0:
        return math.inf
    return float((max(y1, 0.0) / y0) ** (1.0 / math.log2(x1 / x0)) - 1.0)


def _answers(agg: Mapping[str, Any]) -> bool:
    req = agg.get("requests") or {}
    return bool(req.get("ok")) and level_state(dict(agg)) != "unsustainable"


def counts(agg: Mapping[str, Any]) -> bool:
    """Whether a level can be an operating point: it answered some requests, kept up
    with its rate, and its client-limited flag (if any) is only marginal."""
    return _answers(agg) and not flagged(dict(agg))


def _throughput(agg: Mapping[str, Any]) -> float:
    return (
        as_float(agg.get("output_token_throughput"))
        or as_float(agg.get("request_throughput"))
        or 0.0
    )


def _latency(agg: Mapping[str, Any]) -> float:
    for key in ("ttft", "e2e"):
        v = as_float((agg.get(key) or {}).get("p99"))
        if v is not None:
            return v
    return math.inf


def best_level(
    levels: Sequence[tuple[str, Mapping[str, Any]]], *, knee_level: str | None = None
) -> str | None:
    """The name of the best operating point among ``levels`` (name, aggregate), or None
    when none counts."""
    # The knee level counts despite a client flag: the curve past it measured the knee.
    cands = [(n, a) for n, a in levels if counts(a) or (n == knee_level and _answers(a))]
    if not cands:
        return None
    top = max(_throughput(a) for _, a in cands)
    near = [(n, a) for n, a in cands if _throughput(a) >= (1 - WITHIN) * top or n == knee_level]
    steady = [(n, a) for n, a in near if (a.get("window") or {}).get("steady")]
    pool = steady or near
    return min(pool, key=lambda c: (_latency(c[1]), -_throughput(c[1])))[0]
