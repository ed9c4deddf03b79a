"""The limiter and the fix, from the model (docs/design.md section 9).

The limiter is the constraint that binds at the measured operating point (the most
loaded level the model was fitted on): errors above 1% (upstream); every level
client-limited (client); a queue with the slots full, when more slots would buy
throughput or first tokens (slots); a queue with KV full (kv); a step time that grew
with the running count (compute); else none. The fix is the smallest change of one
knob that the model predicts meets the goal (the run's SLO, else serving the offered
load, else the best throughput within 5%), never beyond twice the measured range of a
fitted variable, with its predicted effect, its basis and the self-check's error.
"""

from __future__ import annotations

import math

import numpy as np

from infersight.core.server_model import Basis, Fix, Prediction, SelfCheck, ServerModel
from infersight.servermodel.bounds import beyond_measured
from infersight.servermodel.data import LevelData, RunData
from infersight.servermodel.evaluate import engine_of, figures, predict_load
from infersight.servermodel.fit import step_time
from infersight.servermodel.simulate import Load, simulate
from infersight.stats.operating_point import growth_per_doubling

__all__ = ["ERROR_LIMIT", "advise", "limiter", "meets"]

#: Error share above which the upstream is the limiter.
ERROR_LIMIT = 0.01
#: How far beyond the measured range a fix may go, per fitted variable.
RANGE = 2.0
#: Share of requests that waited for admission above which a queue binds.
QUEUED = 0.10
#: Throughput growth per doubling of the running count below which compute has bent
#: (100%: each added sequence bought its full share; 68%: the step grew 19% a doubling).
BENT = 2**0.75 - 1
#: Requests simulated per candidate setting (enough for a stable p50 and p99).
REQUESTS = 800


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


def _operating(d: RunData, m: ServerModel) -> LevelData | None:
    fitted = [lv for lv in d.levels if lv.name in m.levels and lv.figures.get("throughput")]
    if not fitted:
        return None
    return max(fitted, key=lambda lv: (lv.concurrency or 0, lv.rate or 0.0))


def _workload(d: RunData, lv: LevelData) -> tuple[np.ndarray, np.ndarray]:
    idx = lv.idx[d.ok[lv.idx]] if d.ok[lv.idx].any() else lv.idx
    fill = float(np.nanmean(d.prompt)) if np.isfinite(d.prompt).any() else 0.0
    return np.nan_to_num(d.prompt[idx], nan=fill), np.maximum(d.output[idx], 1.0)


def _at(m: ServerModel, d: RunData, lv: LevelData, **knobs: float | int | None) -> Prediction:
    """The model at the level's own load with some knobs changed: a closed loop's
    clients, or an open loop's own send times (a trace's bursts stay bursts), split
    evenly over ``replicas``."""
    prompt, output = _workload(d, lv)
    slots, kv, sat = knobs.get("slots"), knobs.get("kv"), knobs.get("saturate")
    reps = int(knobs.get("replicas") or 1)
    if lv.closed:
        return predict_load(
            m,
            prompt,
            output,
            slots=slots,
            kv=kv,
            concurrency=lv.concurrency,
            think=m.think.get(lv.name, 0.0),
            replicas=reps,
            slo=d.slo or None,
            requests=REQUESTS,
            saturate=sat,
        )
    idx = lv.idx[np.argsort(d.scheduled[lv.idx], kind="stable")]
    fill = float(np.nanmean(d.prompt)) if np.isfinite(d.prompt).any() else 0.0
    sends = d.scheduled[idx] - float(d.scheduled[idx].min())
    mine = np.arange(idx.size) % reps == 0  # one replica's share, every reps-th request
    eng = engine_of(m, slots=slots, kv=kv, saturate=sat)
    load = Load(
        prompt=np.nan_to_num(d.prompt[idx][mine], nan=fill),
        output=np.maximum(d.output[idx][mine], 1.0),
        arrivals=sends[mine],
        max_tokens=m.measured.get("max_tokens"),
    )
    p = figures(simulate(eng, load), rate=(lv.rate / reps) if lv.rate else None, slo=d.slo or None)
    if reps > 1:
        p.throughput = None if p.throughput is None else p.throughput * reps
        p.goodput = None if p.goodput is None else p.goodput * reps
    return p


def _measured_growth(d: RunData, m: ServerModel, lv: LevelData, here: Prediction) -> float | None:
    """The measured throughput's growth per doubling of the running count, from the
    most loaded fitted level that ran at most two thirds as many sequences (the model's
    running count at each level's load) to the operating level; None where no such
    level was measured."""
    top_r, top_t = here.running or 0.0, lv.figures.get("throughput") or 0.0
    below = sorted(
        (o for o in d.levels if o.name in m.levels and o is not lv and o.figures.get("throughput")),
        key=lambda o: (o.concurrency or 0, o.rate or 0.0),
        reverse=True,
    )
    for o in below:
        r = _at(m, d, o).running or 0.0
        if 0.0 < r <= top_r / 1.5:
            return growth_per_doubling(r, float(o.figures["throughput"] or 0.0), top_r, top_t)
    return None


def limiter(d: RunData, m: ServerModel, here: Prediction | None = None) -> tuple[str, str]:
    """The binding constraint at the operating point, and the evidence in words."""
    if m.error_share > ERROR_LIMIT:
        return "upstream", f"{m.error_share:.1%} of requests failed (over {ERROR_LIMIT:.0%})"
    if d.levels and all(lv.at_ceiling for lv in d.levels):
        return "client", "every level was client-limited: the load generator set the pace"
    top = max(d.levels, key=lambda lv: (lv.concurrency or 0, lv.rate or 0.0), default=None)
    if top is not None and top.at_ceiling:
        return "client", (
            f"the most loaded level ({top.name}) was client-limited: the load "
            "generator reached its ceiling before the server showed a limit"
        )
    lv = _operating(d, m)
    if lv is None:
        return "none", "no level to judge"
    here = here or _at(m, d, lv)
    s = m.slots.value
    waiting, running = here.waiting or 0.0, here.running or 0.0
    queue = waiting > 0.5 or (here.queued or 0.0) >= QUEUED
    if queue and m.kv_tokens is not None and s is None:
        return "kv", (
            f"{waiting:.1f} waiting while the KV cache ({m.kv_tokens.text()}) is "
            f"full at {running:.1f} running"
        )
    grow = float(
        step_time(max(running, 1.0), m.a.value or 0.0, m.b.value or 0.0, m.k.value or 0.0)
        / max(m.a.value or 1e-9, 1e-9)
    )
    # a step time that grew while the measured throughput still grew in proportion to
    # the running count (a client short of CPU reads its tokens late) is no compute limit
    # (no lower level measured: nothing shows that it did not bend)
    g = _measured_growth(d, m, lv, here) if grow >= 1.2 else None
    bent = grow >= 1.2 and (g is None or g < BENT)
    shown = "" if g is None else f"; throughput grew {g:.0%} per doubling of the running count"
    if queue and s is not None and (running >= s - 0.5 or (here.queued or 0.0) >= QUEUED):
        waited = (
            f"{here.queued or 0.0:.0%} of requests waited for a slot ({waiting:.1f} on "
            f"average) with all {s:.0f} busy"
        )
        ran = m.measured.get("n", s)
        more = min(RANGE * ran, 2 * s)
        if more <= s:
            return "slots", f"{waited}; the run's range shows nothing about more slots"
        # where the run saw compute bend (the step time grew, and the measured
        # throughput stopped growing with the running count), more slots are judged
        # with the step growing at least in proportion past the top it measured: a
        # hinge's slope fitted over the last few running counts is no evidence that
        # the growth slows there. Step growth that the throughput does not show (a
        # client short of CPU reads its tokens late) is judged by the model as fitted.
        seen = (m.b.value or 0.0) > 0 and (m.k.value or 0.0) < ran and bent
        wider = _at(m, d, lv, slots=math.floor(more), saturate=ran if seen else None)
        gain = (wider.throughput or 0.0) / max(here.throughput or 1e-9, 1e-9)
        # first tokens that come sooner only because the queue moved into the engine
        # are no gain: the slots bind when more of them buy throughput, or whole
        # answers (the tail an open loop's bursts wait for)
        quicker = (here.e2e_p99 or 0.0) / max(wider.e2e_p99 or 1e-9, 1e-9)
        if gain >= 1.10 or quicker >= 1.25:
            what = (
                f"×{gain:.2f} throughput"
                if gain >= 1.10
                else f"answers ×{quicker:.2f} sooner (e2e p99)"
            )
            return "slots", f"{waited}; {math.floor(more)} slots would give {what}"
        if bent:
            return "compute", (
                f"{waited}, but more slots would not raise throughput: the step "
                f"time is ×{grow:.2f} the single-sequence step at this load{shown}"
            )
        return "slots", f"{waited}; more slots would change little at this load"
    if bent:
        return "compute", (
            f"the step time grew ×{grow:.2f} from one sequence to "
            f"{running:.1f} running while slots were free{shown}"
        )
    return "none", f"{running:.1f} running, {waiting:.1f} waiting: nothing binds"


def _past_range(
    fix: Fix, m: ServerModel, d: RunData, lv: LevelData, knobs: dict[str, float]
) -> Fix:
    """The fix as an estimate, with its low end, where it runs more sequences than the
    run had (``bounds.beyond_measured``)."""
    low, note = beyond_measured(m, fix.predicted, lambda n: _at(m, d, lv, **knobs, saturate=n))
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
    lv = _operating(d, m)
    if lv is None:
        return "none", "no level to judge", None
    here = _at(m, d, lv)
    lim, why = limiter(d, m, here)
    error = sc.worst()
    goal = "slo" if d.slo else ("throughput" if not lv.closed else "best throughput")
    basis: Basis = "model" if sc.trusted else "estimate"
    s = m.slots.value
    if lim in ("upstream", "client", "none"):
        return (
            lim,
            why,
            Fix(knob=None, predicted=here, basis=basis, error=error, goal=goal, rests_on=why),
        )
    cands: list[tuple[str, float, Prediction]] = []
    if lim in ("slots", "kv") and s is not None:
        top = math.floor(min(RANGE * m.measured.get("n", s), RANGE * s))
        for n in range(int(s) + 1, top + 1):
            cands.append(("slots", float(n), _at(m, d, lv, slots=n)))
    kv_now = m.kv_tokens.value if m.kv_tokens is not None else None
    if lim == "kv" and kv_now:
        for f in (1.25, 1.5, 1.75, RANGE):
            cands.append(("kv", kv_now * f, _at(m, d, lv, kv=kv_now * f)))
    best = max([here.throughput or 0.0, *(p.throughput or 0.0 for _, _, p in cands)])
    for k, v, p in cands:
        if _goal(d, lv, p, best):
            fix = Fix(
                knob=k,
                from_value=s if k == "slots" else kv_now,
                to_value=v,
                predicted=p,
                basis=basis,
                error=error,
                goal=goal,
                rests_on=why,
            )
            return lim, why, _past_range(fix, m, d, lv, {k: v})
    # more of the limiting resource does not reach the goal in range: replicas. A
    # closed loop's clients are spread until each replica runs unqueued near its
    # single-sequence step time (more of them buy nothing).
    alone = float(step_time(1.0, m.a.value or 0.0, m.b.value or 0.0, m.k.value or 0.0))
    for r in range(2, 33):
        p = _at(m, d, lv, replicas=r)
        done = (
            ((p.tpot_p50 or 0.0) <= 1.2 * alone and (p.waiting or 0.0) < 0.5)
            if lv.closed and not d.slo
            else _goal(d, lv, p, best)
        )
        if done:
            fix = Fix(
                knob="replicas",
                from_value=1,
                to_value=r,
                predicted=p,
                basis=basis,
                error=error,
                goal=goal,
                rests_on=why,
            )
            return lim, why, _past_range(fix, m, d, lv, {"replicas": r})
    return (
        lim,
        why,
        Fix(
            knob=None,
            predicted=here,
            basis=basis,
            error=error,
            goal=goal,
            rests_on=why + "; no change within the measured range meets the goal",
        ),
    )
