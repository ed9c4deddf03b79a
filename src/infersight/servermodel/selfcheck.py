"""The model checked on the run itself (docs/design.md section 9).

With three usable levels or more, each is left out in turn: the model is fitted on
the others and predicts the held-out level from its own load (its send times in an
open loop, its clients and think time in a closed one) and its own prompt and output
lengths. With two, the model predicts the levels it was fitted on (an in-sample
residual, labelled so). The error is the absolute percentage error of throughput,
TTFT p50 and TPOT p50; the model's numbers beyond the measured range are trusted only
when every metric's mean error is within ``MAPE_LIMIT`` and the binding levels were
not client-limited.

The single-client level, held out, is shown but not counted in the mean: it alone
runs one sequence at a time, so the others can only extrapolate to it, and no figure
the model gives runs fewer than it did (a run that measured c=1 predicts each later
setting from a fit that includes it). An engine whose step doubles from one sequence
to two and then grows slowly (llama.cpp on a CPU) fails that extrapolation whatever
the model's worth at the settings it is asked about.
"""

from __future__ import annotations

import math

import numpy as np

from infersight.core.server_model import (
    CHECKED_METRICS,
    MAPE_LIMIT,
    LevelCheck,
    SelfCheck,
    ServerModel,
)
from infersight.servermodel.data import LevelData, RunData
from infersight.servermodel.evaluate import engine_of, figures, prompt_fill
from infersight.servermodel.fit import fit_model
from infersight.servermodel.simulate import Load, simulate

__all__ = ["predict_level", "self_check"]


def predict_level(
    m: ServerModel,
    d: RunData,
    lv: LevelData,
    slots: float | None = None,
    saturate: float | None = None,
) -> dict[str, float | None]:
    """The model's figures for a level of a run, from that level's own load (its
    clients and think time, or its send times), at ``slots`` (default: the model's);
    ``saturate``: see ``engine_of``."""
    idx = lv.idx[np.argsort(d.scheduled[lv.idx], kind="stable")]
    prompt = np.nan_to_num(d.prompt[idx], nan=prompt_fill(d))
    output = np.maximum(d.output[idx], 1.0)
    # merged trials: each level at its own limit, unless a limit is asked for
    eng = engine_of(m, slots=slots if slots is not None else lv.slots, saturate=saturate)
    if lv.closed:
        think = m.think.get(lv.name)
        if think is None and d.no_think:
            think = 0.0
        if think is None:  # held out: its own turnaround, a property of the client
            ii = idx[d.ok[idx] & np.isfinite(d.end[idx])]
            thr = lv.figures.get("throughput") or 0.0
            resp = float(np.mean(d.end[ii] - d.sent[ii])) if ii.size else 0.0
            think = max(0.0, (lv.concurrency or 1) / thr - resp) if thr else 0.0
        span = float(np.nanmax(d.sent[idx]) - np.nanmin(d.scheduled[idx]))
        load = Load(
            prompt=prompt,
            output=output,
            clients=lv.concurrency,
            think=think,
            count=idx.size,
            max_tokens=m.measured.get("max_tokens"),
            duration=span + 1e-3,
        )
        sim = simulate(eng, load)
        p = figures(sim, concurrency=lv.concurrency)
    else:
        # the server saw the requests when they were sent; the level's figures count
        # from when they were meant to be (a late client's lag is part of them)
        t0 = float(np.min(d.scheduled[idx]))
        sent = np.where(np.isfinite(d.sent[idx]), d.sent[idx], d.scheduled[idx])
        load = Load(
            prompt=prompt,
            output=output,
            arrivals=sent - t0,
            max_tokens=m.measured.get("max_tokens"),
        )
        p = figures(simulate(eng, load), rate=lv.rate, lag=sent - d.scheduled[idx])
    return {k: getattr(p, k) for k in (*CHECKED_METRICS, "ttft_p99", "e2e_p50", "running")}


def _counts(lv: LevelData, usable: list[LevelData]) -> bool:
    """Whether ``lv``'s held-out error counts: not the single-client level of a run
    whose other levels all ran more clients."""
    return not (
        lv.concurrency == 1
        and all(o.concurrency is not None and o.concurrency > 1 for o in usable if o is not lv)
    )


def _check(lv: LevelData, pred: dict[str, float | None], counted: bool = True) -> LevelCheck:
    err: dict[str, float | None] = {}
    for k in CHECKED_METRICS:
        meas, got = lv.figures.get(k), pred.get(k)
        err[k] = (
            abs(got - meas) / abs(meas) if meas and got is not None and math.isfinite(got) else None
        )
    return LevelCheck(
        level=lv.name,
        measured={k: lv.figures.get(k) for k in CHECKED_METRICS},
        predicted={k: pred.get(k) for k in CHECKED_METRICS},
        error=err,
        counted=counted,
    )


def self_check(d: RunData, m: ServerModel) -> SelfCheck:
    """Leave one level out (or the in-sample residual with two levels)."""
    usable = [lv for lv in d.levels if lv.name in m.levels and lv.figures.get("throughput")]
    checks: list[LevelCheck] = []
    if len(usable) >= 3:
        method = "leave-one-level-out"
        for lv in usable:
            others = [o.name for o in usable if o is not lv]
            try:
                sub = fit_model(d, others)
            except ValueError:
                continue
            checks.append(_check(lv, predict_level(sub, d, lv), _counts(lv, usable)))
    elif len(usable) == 2:
        method = "in-sample"
        checks = [_check(lv, predict_level(m, d, lv)) for lv in usable]
    else:
        return SelfCheck(
            method="none",
            trusted=False,
            why_not="fewer than two usable levels: nothing to check the model on",
        )
    mape: dict[str, float | None] = {}
    for k in CHECKED_METRICS:
        vals = [v for c in checks if c.counted and (v := c.error.get(k)) is not None]
        mape[k] = float(np.mean(vals)) if vals else None
    sc = SelfCheck(method=method, levels=checks, mape=mape)
    worst = sc.worst()
    limited = [lv.name for lv in d.levels if lv.at_ceiling]
    if worst is None:
        sc.why_not = "no held-out level could be predicted"
    elif worst > MAPE_LIMIT:
        metric = max((k for k in mape if mape[k] is not None), key=lambda k: mape[k] or 0.0)
        sc.why_not = (
            f"the model's held-out error is {worst:.0%} on {metric.replace('_', ' ')} "
            f"(over {MAPE_LIMIT:.0%})"
        )
    elif method == "in-sample":
        sc.why_not = "two levels only: the error is in-sample, not held out"
    elif limited and len(limited) >= len(d.levels) - 1:
        sc.why_not = f"the most loaded levels were client-limited ({', '.join(limited)})"
    sc.trusted = not sc.why_not
    return sc
