"""The measured knee and the shape of the plateau (docs/design.md sections 2 and 5).

The levels are ordered by the work offered (the client's requests in flight: an
admission limit caps the engine's R, so R alone would not double). The plateau starts
at the first level past which throughput grows by less than 10% per doubling of that
work, judged against every later level at least 1.4 times as loaded. Its shape says
what binds:

- TPOT grows (by 20% or more to the plateau's last level from its first, or from a less
  loaded level where TPOT was longer: a client starved of CPU reads a stream's tokens
  in bursts, which makes one level's TPOT look short), or the engine's own running
  count grows (by 1.4 times or more: the time in the engine grew with it, Little's
  law): compute. That first level is the *measured knee*. TPOT growth alone does not
  count where the engine's running count was measured and held (under 1.2 times).
- TPOT stays flat, the engine's running count (where measured) too, and TTFT grows (by
  50% or more): an admission limit (slots, a scheduler budget); the limit is throughput
  x time in the engine before any queue formed (Little's law), so it is found with no
  engine metric at all.

Levels that do not count (unsustainable open-loop rates, whose in-flight count is a
growing queue; levels without throughput) are left out of the search.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from infersight.core.curve import CapacityCurve, CurvePoint
from infersight.core.verdicts import Evidence
from infersight.stats.operating_point import growth_per_doubling

__all__ = [
    "find_knee",
    "knee_evidence",
]

#: Throughput growth per doubling of in-flight work below which the curve is flat.
FLAT_GROWTH = 0.10
#: A later level counts against a candidate knee when it has this much more work.
MIN_STEP = 1.4
#: TPOT (or TTFT) ratio, last plateau level over the first, that counts as growing.
TPOT_GROWS = 1.20
TTFT_GROWS = 1.50


@dataclass(frozen=True, slots=True)
class _P:
    point: CurvePoint
    x: float
    thr: float


def _usable(points: Sequence[CurvePoint]) -> list[_P]:
    out = []
    for p in points:
        x = p.client_inflight if p.client_inflight else p.inflight
        if p.sustainable is False or not x or not p.throughput:
            continue
        out.append(_P(p, float(x), float(p.throughput)))
    return sorted(out, key=lambda q: q.x)


def _plateau_start(ps: Sequence[_P]) -> int | None:
    for i, p in enumerate(ps):
        later = [q for q in ps[i + 1 :] if q.x >= MIN_STEP * p.x]
        if not later:
            return None
        if all(growth_per_doubling(p.x, p.thr, q.x, q.thr) < FLAT_GROWTH for q in later):
            return i
    return None


def _ratio(a: float | None, b: float | None) -> float | None:
    return b / a if a and b is not None and a > 0 else None


def _engine_growth(a: CurvePoint, b: CurvePoint) -> float | None:
    """How much the engine's running count grew from ``a`` to ``b`` (None unless the
    engine measured both)."""
    if a.inflight_source != "engine" or b.inflight_source != "engine" or not a.inflight:
        return None
    return (b.inflight or 0.0) / a.inflight


def _service_time(ps: Sequence[_P], upto: int) -> float | None:
    """Time in the engine before a queue formed: the least loaded level's (up to the
    plateau's first level), whose in-flight count is all being served."""
    times = [p.point.time_in_engine for p in ps[: upto + 1] if p.point.time_in_engine]
    return min(times) if times else None


def find_knee(curve: CapacityCurve) -> None:
    """Fill ``curve``'s knee, plateau, ``above`` and notes from its points."""
    ps = _usable(curve.points)
    if not ps:
        curve.notes.append("no level counts for the curve (none sustainable with throughput)")
        return
    top = max(p.point.inflight or p.x for p in ps)
    i = _plateau_start(ps)
    if i is None:
        curve.knee_reached, curve.above = False, top
        what = "one level: a single point" if len(ps) == 1 else "throughput still grew"
        curve.notes.append(f"knee not reached (above {top:.3g} in flight): {what}")
        return
    first, last = ps[i], ps[-1]
    # The reference is the longest TPOT up to the plateau's first level: under a real
    # compute limit TPOT only grows with the work, so that is the first level's own.
    tpots = [p.point.tpot_p50 for p in ps[: i + 1] if p.point.tpot_p50]
    tpot = _ratio(max(tpots) if tpots else None, last.point.tpot_p50)
    ttft = _ratio(first.point.ttft_p50, last.point.ttft_p50)
    curve.plateau_level = first.point.level
    at = first.point.inflight or first.x
    if i == 0:
        curve.notes.append(
            f"throughput was already flat at the least loaded level "
            f"({first.point.level}): the plateau starts at or below it"
        )
    # The engine's own R tells the two apart most directly: an admission limit caps it,
    # while work that grew in the engine without more throughput is compute, whether the
    # time went to decode steps (TPOT) or elsewhere in the engine (R / X, Little's law).
    grew = _engine_growth(first.point, last.point)
    # Where the engine measured R and it held (< 1.2x), the same running count took the
    # same step time: a TPOT that grew there is the client's reading (short of CPU, it
    # reads a stream's last tokens late), not compute.
    slower = tpot is not None and tpot >= TPOT_GROWS and (grew is None or grew >= TPOT_GROWS)
    if slower or (grew is not None and grew >= MIN_STEP):
        curve.plateau, curve.plateau_at = "compute", at
        curve.knee, curve.knee_level, curve.knee_reached = at, first.point.level, True
        curve.above = None
        return
    curve.knee_reached, curve.above = False, top
    if ttft is not None and ttft >= TTFT_GROWS and (grew is None or grew < TPOT_GROWS):
        curve.plateau = "admission"
        service = _service_time(ps, i)
        plateau_thr = sum(p.thr for p in ps[i:]) / len(ps[i:])
        if first.point.inflight_source == "engine" and first.point.inflight:
            curve.plateau_at = max(p.point.inflight or 0.0 for p in ps[i:])
        elif service:
            curve.plateau_at = plateau_thr * service
        else:
            curve.plateau_at = at
        return
    curve.plateau_at = at
    curve.notes.append(
        f"throughput is flat from {first.point.level} on, but neither TPOT nor TTFT grew "
        "with the work: the shape does not say what binds"
    )


def knee_evidence(curve: CapacityCurve | None, level: str | None) -> list[Evidence]:
    """The measured knee against ``level``: what a compute verdict there quotes."""
    pts = {p.level: p for p in curve.points} if curve is not None else {}
    knee, here = pts.get(curve.knee_level or "") if curve else None, pts.get(level or "")
    if curve is None or not curve.knee_reached or knee is None or here is None:
        return []
    x0, x1 = knee.client_inflight or knee.inflight, here.client_inflight or here.inflight
    g = None
    if x0 and x1 and knee.throughput and here.throughput:
        g = growth_per_doubling(x0, knee.throughput, x1, here.throughput)
    src = f"capacity curve (the run's levels), the knee at {knee.level}"
    rows = (
        ("knee", "measured knee", curve.knee, "in flight"),
        ("throughput_at_knee", "throughput at the knee", knee.throughput, "req/s"),
        ("throughput", "throughput here", here.throughput, "req/s"),
        ("growth_per_doubling", "throughput growth per doubling", g, "fraction"),
        ("tpot_at_knee", "TPOT p50 at the knee", knee.tpot_p50, "s"),
        ("tpot_p50", "TPOT p50 here", here.tpot_p50, "s"),
    )
    return [Evidence(key=k, name=n, value=v, unit=u, source=src) for k, n, v, u in rows]
