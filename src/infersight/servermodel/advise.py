"""The limiter and the fix, from the model (docs/design.md section 9).

The limiter is ``binding.limiter``'s. The fix is the smallest change of one
knob that the model predicts meets the goal (the run's SLO, else serving the offered
load, else the best throughput within 5%), never beyond twice the measured range of a
fitted variable, with its predicted effect, its basis and the self-check's error.
"""

import math
from functools import partial

from infersight.core.server_model import Basis, Fix, Prediction, SelfCheck, ServerModel
from infersight.servermodel.binding import RANGE, at_level, level_limiters, limiter, operating
from infersight.servermodel.bounds import beyond_measured
from infersight.servermodel.data import LevelData, RunData
from infersight.servermodel.features import step_time

__all__ = ["HELD", "advise", "level_limiters", "limiter", "meets"]

#: Knobs every level of a bench run holds at one value: a fix on them is not checked.
HELD = {"kv": "with one KV capacity", "replicas": "on one replica"}


def meets(p: Prediction, slo: dict[str, float]) -> bool | None:
    """Whether a prediction meets every SLO goal it can be checked on (None: none)."""
    checked = False
    for key, limit in slo.items():
        v = getattr(p, key, None)
        if v is None:
            continue
        checked = True
        if v > limit:
            return False
    return True if checked else None


def _past_range(
    fix: Fix, m: ServerModel, d: RunData, lv: LevelData, knobs: dict[str, float]
) -> Fix:
    """The fix as an estimate, with its low end, where it runs more sequences than the
    run had (``bounds.beyond_measured``)."""
    low, note = beyond_measured(m, fix.predicted, lambda n: at_level(m, d, lv, **knobs, saturate=n))
    held = [k for k in knobs if k in HELD]
    if held:
        # every level ran at one KV capacity and one replica: the self-check's error says
        # nothing about changing them (docs/design.md section 9); a range instead
        n = m.measured.get("n") or None
        low = low if low is not None else at_level(m, d, lv, **knobs, saturate=n)
        note = (
            f"not checked: every level ran {' and '.join(HELD[k] for k in held)}; "
            f"{note or 'the range runs from compute saturating at the measured top'}"
        )
        fix = fix.model_copy(update={"error": None})
    if not note:
        return fix
    return fix.model_copy(
        update={"basis": "estimate", "if_saturated": low, "rests_on": f"{fix.rests_on}; {note}"}
    )


def _goal(d: RunData, lv: LevelData, p: Prediction, best: float) -> bool:
    if d.slo:
        ok = meets(p, d.slo)
        if ok is not None:
            return ok
    if not lv.closed and lv.rate:
        return (p.throughput or 0.0) >= 0.95 * lv.rate
    return (p.throughput or 0.0) >= 0.95 * best


def advise(d: RunData, m: ServerModel, sc: SelfCheck) -> tuple[str, str, Fix | None]:
    """(limiter, evidence, fix) for the run; the fix is None when nothing should change."""
    lv = operating(d, m)
    if lv is None:
        return "none", "no level to judge", None
    here = at_level(m, d, lv)
    lim, why = limiter(d, m, here)
    error = sc.worst()
    goal = "slo" if d.slo else ("throughput" if not lv.closed else "best throughput")
    basis: Basis = "model" if sc.trusted else "estimate"
    s = m.slots.value
    # Every fix this run gets shares its basis, error and goal.
    fix_of = partial(Fix, basis=basis, error=error, goal=goal)
    if lim in ("upstream", "client", "none", "unknown"):
        return lim, why, fix_of(knob=None, predicted=here, rests_on=why)
    cands: list[tuple[str, float, Prediction]] = []
    if lim in ("slots", "kv") and s is not None:
        top = math.floor(min(RANGE * m.measured.get("n", s), RANGE * s))
        for n in range(int(s) + 1, top + 1):
            cands.append(("slots", float(n), at_level(m, d, lv, slots=n)))
    kv_now = m.kv_tokens.value if m.kv_tokens is not None else None
    if lim == "kv" and kv_now:
        for f in (1.25, 1.5, 1.75, RANGE):
            cands.append(("kv", kv_now * f, at_level(m, d, lv, kv=kv_now * f)))
    best = max([here.throughput or 0.0, *(p.throughput or 0.0 for _, _, p in cands)])
    for k, v, p in cands:
        if _goal(d, lv, p, best):
            before = s if k == "slots" else kv_now
            fix = fix_of(knob=k, from_value=before, to_value=v, predicted=p, rests_on=why)
            return lim, why, _past_range(fix, m, d, lv, {k: v})
    # more of the limiting resource does not reach the goal in range: replicas. A
    # closed loop's clients are spread until each replica runs unqueued near its
    # single-sequence step time (more of them buy nothing).
    alone = float(step_time(1.0, m.a.value or 0.0, m.b.value or 0.0, m.k.value or 0.0))
    for r in range(2, 33):
        p = at_level(m, d, lv, replicas=r)
        done = (
            ((p.tpot_p50 or 0.0) <= 1.2 * alone and (p.waiting or 0.0) < 0.5)
            if lv.closed and not d.slo
            else _goal(d, lv, p, best)
        )
        if done:
            fix = fix_of(knob="replicas", from_value=1, to_value=r, predicted=p, rests_on=why)
            return lim, why, _past_range(fix, m, d, lv, {"replicas": r})
    return (
        lim,
        why,
        fix_of(
            knob=None,
            predicted=here,
            rests_on=why + "; no change within the measured range meets the goal",
        ),
    )
