"""The rule the capacity curve adds: compute-bound, measured (docs/design.md section 5).

A level past the run's measured knee (at least 1.4 times its work in flight) whose TPOT,
or time in the engine where the engine measured it, has grown (by 20% or more) while
throughput has not: the device computes as fast as it
can, so more slots buy latency, not throughput. The fix is replicas or faster
hardware, and slots near the knee, with the numbers of
:mod:`infersight.diagnose.fix_numbers`.
"""

from __future__ import annotations

from infersight.core.server_model import action
from infersight.core.verdicts import Verdict
from infersight.diagnose.fixes import replica_fixes, slot_flag
from infersight.diagnose.knee import MIN_STEP, TPOT_GROWS
from infersight.diagnose.rules_base import FixLine, RuleInput, evidence, make_verdict, rq_evidence
from infersight.stats.operating_point import growth_per_doubling

__all__ = ["compute_bound", "compute_fixes"]

_SRC = "capacity curve (the run's levels: aggregates and engine R)"


def _ms(v: float | None) -> str:
    return "n/a" if v is None else f"{v * 1000:.3g} ms"


def compute_fixes(ri: RuleInput) -> list[FixLine]:
    """Replicas (or faster hardware) for the load, and the slot limit near the knee."""
    fix, curve, s = ri.fix, ri.curve, ri.s
    out: list[FixLine] = []
    if fix is not None and (fix.replicas or 1) > 1:
        out.append(
            (
                f"run {fix.replicas} replicas behind `infersight gateway` (or faster "
                f"hardware) for {fix.target_rate:.3g} req/s: {fix.why()}",
                action("replicas", "up", from_value=1, to_value=fix.replicas),
            )
        )
    elif fix is not None and fix.no_number:
        out.append(
            (
                "for more throughput add replicas behind `infersight gateway`, or faster "
                f"hardware (no number beyond the measured range: {fix.no_number})",
                action("replicas", "up", from_value=1),
            )
        )
    else:
        out.append(
            "for more throughput add replicas behind `infersight gateway`, or faster "
            "hardware: this one is at its compute limit"
        )
    flag, knee = slot_flag(ri.ctx.engine), curve.knee if curve is not None else None
    current = round(s.S) if s.S else None
    if current and fix is not None and fix.slots is not None and current > fix.slots:
        out.append(
            (
                f"lower {flag} {current} \u2192 {fix.slots} ({fix.short()}; the measured "
                f"knee is {knee if knee is not None else 'not reached'}): slots past the "
                "knee add latency, not throughput",
                action("slots", from_value=current, to_value=fix.slots),
            )
        )
    elif current:
        out.append(
            (
                f"keep {flag} at {current}: more slots add latency, not throughput",
                action("slots", "hold", from_value=current, to_value=current),
            )
        )
    out += replica_fixes(ri.ctx.engine)[1:2]
    return out


def compute_bound(ri: RuleInput) -> Verdict | None:
    curve, here = ri.curve, ri.point()
    if curve is None or here is None or not curve.knee_reached or curve.knee_level is None:
        return None
    knee = next(p for p in curve.points if p.level == curve.knee_level)
    x0, x1 = knee.client_inflight or knee.inflight, here.client_inflight or here.inflight
    if not x0 or not x1 or x1 < MIN_STEP * x0 or not knee.tpot_p50 or not here.tpot_p50:
        return None
    if not knee.throughput or not here.throughput:
        return None
    slower = here.tpot_p50 >= TPOT_GROWS * knee.tpot_p50
    # or, where the engine measured its R, each request's time in it grew (Little's law)
    longer = (
        knee.inflight_source == here.inflight_source == "engine"
        and knee.time_in_engine
        and (here.time_in_engine or 0.0) >= TPOT_GROWS * knee.time_in_engine
    )
    if not slower and not longer:
        return None
    g = growth_per_doubling(x0, knee.throughput, x1, here.throughput)
    ev = [
        evidence("knee", "measured knee", curve.knee, "in flight", _SRC + f", level {knee.level}"),
        evidence(
            "throughput_at_knee",
            f"throughput at the knee ({knee.level})",
            knee.throughput,
            "req/s",
            _SRC,
        ),
        evidence("throughput", "throughput here", here.throughput, "req/s", _SRC),
        evidence("growth_per_doubling", "throughput growth per doubling", g, "fraction", _SRC),
        evidence("tpot_at_knee", f"TPOT p50 at the knee ({knee.level})", knee.tpot_p50, "s", _SRC),
        evidence("tpot_p50", "TPOT p50 here", here.tpot_p50, "s", _SRC),
        evidence(
            "time_in_engine_at_knee",
            "time in the engine at the knee",
            knee.time_in_engine,
            "s",
            _SRC,
        ),
        evidence("time_in_engine", "time in the engine here", here.time_in_engine, "s", _SRC),
        evidence("inflight", "in flight here", here.inflight, "requests", _SRC),
        *rq_evidence(ri),
    ]
    cost = (
        f"TPOT went {_ms(knee.tpot_p50)} \u2192 {_ms(here.tpot_p50)}"
        if slower
        else f"the time in the engine went {knee.time_in_engine:.3g} \u2192 "
        f"{here.time_in_engine:.3g} s (TPOT {_ms(knee.tpot_p50)} \u2192 {_ms(here.tpot_p50)})"
    )
    summary = (
        f"From {knee.level} ({knee.inflight or x0:.3g} running) to {here.level} "
        f"({here.inflight or x1:.3g} running, {x1:.3g} in flight) throughput went "
        f"{knee.throughput:.3g} \u2192 {here.throughput:.3g} req/s ({g:+.0%} per doubling of "
        f"the work) while {cost}: the device computes as fast as it can, so more slots add "
        "latency, not throughput."
    )
    return make_verdict(
        ri, "compute_bound", "Compute-bound (measured)", summary, ev, 0.85, compute_fixes(ri)
    )
