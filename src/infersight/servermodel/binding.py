"""The binding constraint, from the model (docs/design.md section 9): at the measured
operating point (the most loaded level the model was fitted on) or at any fitted level.

Errors above 1% (upstream); every level client-limited (client); a queue with KV full
while the slots are not reached (kv); a queue with the slots full, when more slots
would buy throughput or whole answers (slots); a step time that grew with the running
count while the measured throughput stopped growing with it (compute; "unknown" from
one level, which cannot show that); else none.
"""

from __future__ import annotations

import math

import numpy as np

from infersight.core.server_model import Prediction, ServerModel
from infersight.servermodel.data import LevelData, RunData, level_rate
from infersight.servermodel.evaluate import (
    engine_of,
    figures,
    level_workload,
    predict_load,
    prompt_fill,
)
from infersight.servermodel.features import step_time
from infersight.servermodel.simulate import Load, simulate
from infersight.stats.operating_point import growth_per_doubling

__all__ = [
    "ERROR_LIMIT",
    "PREFILL_BOUND",
    "QUEUED",
    "RANGE",
    "REQUESTS",
    "at_level",
    "level_limiters",
    "limiter",
    "operating",
]

#: Error share above which the upstream is the limiter.
ERROR_LIMIT = 0.01
#: How far beyond the measured range a fix may go, per fitted variable.
RANGE = 2.0
#: Share of requests that waited for admission above which a queue binds.
QUEUED = 0.10
#: Throughput growth per doubling of the running count below which compute has bent
#: (100%: each added sequence bought its full share; 68%: the step grew 19% a doubling).
BENT = 2**0.75 - 1
#: Share of the engine's time in batched prefill above which prefill may bind.
PREFILL_BUSY = 0.5
#: How the evidence of a prefill-bound limiter begins (the fix's wording keys on it).
PREFILL_BOUND = "prefill takes"
#: Requests simulated per candidate setting (enough for a stable p50 and p99).
REQUESTS = 800


def operating(d: RunData, m: ServerModel) -> LevelData | None:
    fitted = [lv for lv in d.levels if lv.name in m.levels and lv.figures.get("throughput")]
    if not fitted:
        return None
    return max(fitted, key=lambda lv: (lv.concurrency or 0, lv.rate or 0.0))


def at_level(m: ServerModel, d: RunData, lv: LevelData, **knobs: float | int | None) -> Prediction:
    """The model at the level's own load with some knobs changed: a closed loop's
    clients, or an open loop's own send times (a trace's bursts stay bursts), split
    evenly over ``replicas``."""
    prompt, output = level_workload(d, lv)
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
    sends = d.scheduled[idx] - float(d.scheduled[idx].min())
    mine = np.arange(idx.size) % reps == 0  # one replica's share, every reps-th request
    eng = engine_of(m, slots=slots, kv=kv, saturate=sat)
    load = Load(
        prompt=np.nan_to_num(d.prompt[idx][mine], nan=prompt_fill(d)),
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
        r = at_level(m, d, o).running or 0.0
        if 0.0 < r <= top_r / 1.5:
            return growth_per_doubling(r, float(o.figures["throughput"] or 0.0), top_r, top_t)
    return None


def level_limiters(d: RunData, m: ServerModel) -> dict[str, tuple[str, str]]:
    """Each fitted level's binding constraint and its evidence, by the same rule as
    the run's (a level the load generator limited: "client")."""
    out: dict[str, tuple[str, str]] = {}
    for lv in d.levels:
        if lv.at_ceiling:
            out[lv.name] = ("client", "the load generator set this level's pace")
        elif lv.name in m.levels and lv.figures.get("throughput"):
            out[lv.name] = limiter(d, m, lv=lv)
    return out


def limiter(
    d: RunData, m: ServerModel, here: Prediction | None = None, lv: LevelData | None = None
) -> tuple[str, str]:
    """The binding constraint at the operating point (or at level ``lv``), and the
    evidence in words. Compute bends only where two loads show it: with one level
    measured, it is "unknown"."""
    if m.error_share > ERROR_LIMIT:
        return "upstream", f"{m.error_share:.1%} of requests failed (over {ERROR_LIMIT:.0%})"
    if d.levels and all(o.at_ceiling for o in d.levels):
        return "client", "every level was client-limited: the load generator set the pace"
    top = max(d.levels, key=lambda o: (o.concurrency or 0, o.rate or 0.0), default=None)
    if lv is None and top is not None and top.at_ceiling:
        return "client", (
            f"the most loaded level ({top.name}) was client-limited: the load "
            "generator reached its ceiling before the server showed a limit"
        )
    if lv is None:
        lv = operating(d, m)
    elif here is None:
        here = at_level(m, d, lv)
    if lv is None:
        return "none", "no level to judge"
    lim, why = _binding(d, m, lv, here)
    if lim in ("compute", "none") and len(m.levels) < 2:
        # one load shows neither a queue's cause nor whether throughput stopped growing
        # with the running count: compute and "nothing binds" cannot be told apart
        return "unknown", (
            f"{why}, but one load cannot show whether throughput stopped growing with it"
        )
    return lim, why


def _binding(d: RunData, m: ServerModel, lv: LevelData, here: Prediction | None) -> tuple[str, str]:
    here = here or at_level(m, d, lv)
    s = m.slots.value
    waiting, running = here.waiting or 0.0, here.running or 0.0
    queue = waiting > 0.5 or (here.queued or 0.0) >= QUEUED
    pre = level_rate(d.pre_t, d.pre_n, d, lv)
    if pre is not None and pre > 0 and d.kv_u.size:
        # the engine ran out of KV blocks and evicted running sequences to recompute
        # them later: the throughput they lose is KV's, whatever the step time shows
        return "kv", (
            f"{pre:.2g} preemptions/s: the KV cache ran out of blocks at "
            f"{running:.1f} running, so the engine evicts sequences and recomputes them"
        )
    if queue and m.kv_tokens is not None and (s is None or running < s - 0.5):
        return "kv", (
            f"{waiting:.1f} waiting while the KV cache ({m.kv_tokens.text()}) is "
            f"full at {running:.1f} running"
        )
    # against the single-sequence step (section 9), not the fit's intercept: one
    # sequence running is no growth, however steep the fitted slope
    a, b, k = m.a.value or 0.0, m.b.value or 0.0, m.k.value or 0.0
    grow = float(step_time(max(running, 1.0), a, b, k) / max(step_time(1.0, a, b, k), 1e-9))
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
        # compute bends where the step grew while slots were still free: growth seen only
        # at the slot limit (the engine's most sequences, a closed loop's most streams)
        # is also what an engine and a client contending for shared cores look like,
        # and only relaunching with more slots tells the two apart (design section 11)
        free = float(step_time(max(s - 1.0, 1.0), a, b, k) / max(step_time(1.0, a, b, k), 1e-9))
        if bent and free < 1.2:
            bent = False
            shown = (
                f"; the step time grew ×{grow:.2f} only at the slot limit, which "
                "the run cannot tell from shared cores"
            )
        # where the run saw compute bend (the step time grew, and the measured
        # throughput stopped growing with the running count), more slots are judged
        # with the step growing at least in proportion past the top it measured: a
        # hinge's slope fitted over the last few running counts is no evidence that
        # the growth slows there. Step growth that the throughput does not show (a
        # client short of CPU reads its tokens late) is judged by the model as fitted.
        seen = (m.b.value or 0.0) > 0 and (m.k.value or 0.0) < ran and bent
        wider = at_level(m, d, lv, slots=math.floor(more), saturate=ran if seen else None)
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
            return "slots", f"{waited}; {math.floor(more)} slots would give {what}{shown}"
        if bent:
            return "compute", (
                f"{waited}, but more slots would not raise throughput: the step "
                f"time is ×{grow:.2f} the single-sequence step at this load{shown}"
            )
        prefill = _prefill_bound(d, m, lv, here)
        if prefill:
            return "compute", f"{waited}, but more slots would not raise throughput: {prefill}"
        return "slots", f"{waited}; more slots would change little at this load{shown}"
    if bent:
        return "compute", (
            f"the step time grew ×{grow:.2f} from one sequence to "
            f"{running:.1f} running while slots were free{shown}"
        )
    prefill = _prefill_bound(d, m, lv, here)
    if prefill:
        return "compute", prefill
    return "none", f"{running:.1f} running, {waiting:.1f} waiting: nothing binds"


def _prefill_bound(d: RunData, m: ServerModel, lv: LevelData, here: Prediction) -> str | None:
    """Prompts prefilled together wait for each other's prefill: where that takes most of
    the engine's time and the measured throughput stopped growing with the running
    count, prefill compute binds though the decode step stayed flat (None: it does not)."""
    c, tput = m.c_first.value or 0.0, lv.figures.get("throughput") or 0.0
    if m.prefill_mode != "batched" or c <= 0.0 or tput <= 0.0:
        return None
    prompt, _ = level_workload(d, lv)
    # a lower bound: each group's fixed part (κ steps) is left out
    busy = tput * c * float(np.mean(prompt))
    if busy < PREFILL_BUSY:
        return None  # before the growth, which simulates a lower level
    g = _measured_growth(d, m, lv, here)
    if g is None or g >= BENT:
        return None
    return (
        f"{PREFILL_BOUND} {busy:.0%} of the engine's time at {tput:.2g} req/s ({c * 1e3:.2g} "
        f"s per 1k prompt tokens, prompts prefilled together wait for each other), and "
        f"throughput grew {g:.0%} per doubling of the running count with the decode step flat"
    )
