"""The queueing rule: KV-, slot- and capacity-bound levels (docs/design.md section 5)."""

from __future__ import annotations

from typing import Literal

from infersight.core.server_model import action
from infersight.core.verdicts import Q_SUSTAINED, Evidence, Verdict
from infersight.diagnose.fixes import (
    kv_fixes,
    replica_fixes,
    slot_fix,
    slot_flag,
)
from infersight.diagnose.physics.slots import recommend_slots
from infersight.diagnose.rules.base import (
    ILLUSION_SM,
    KV_FULL,
    R_NEAR_S,
    SATURATED,
    FixLine,
    RuleInput,
    busy_evidence,
    evidence,
    fmt,
    make_verdict,
    rq_evidence,
)
from infersight.diagnose.signals_engine import EngineSignals

__all__ = ["queueing"]


def queueing(ri: RuleInput) -> Verdict | None:
    s, ctx = ri.s, ri.ctx
    if s.Q is None or s.Q_frac is None or s.Q_frac < Q_SUSTAINED or s.Q < 0.5:
        return None
    ev = rq_evidence(ri)
    # An engine that exports no KV usage is never called KV-bound (docs/design.md section 5).
    kv_hi = s.kv_p90 is not None and s.kv_p90 >= KV_FULL
    if s.kv is not None and (kv_hi or (s.P is not None and s.P > 0)):
        ev.append(
            evidence(
                "preemption_rate",
                "preemption rate",
                s.P,
                "1/s",
                "engine /metrics (engine.preemptions_total)",
            )
        )
        why = (
            f"KV cache at {fmt((s.kv_p90 or 0) * 100, 0)}% (p90)"
            if kv_hi
            else f"{fmt(s.P, 2)} preemptions/s"
        )
        return make_verdict(
            ri,
            "kv_bound",
            "Queueing: KV-capacity-bound",
            f"{fmt(s.Q)} requests wait while {fmt(s.R)} run and the {why}: the KV cache, "
            "not the slot limit, caps concurrency.",
            ev,
            0.85,
            kv_fixes(ctx.engine),
        )
    if s.S is not None and s.R is not None and s.R >= R_NEAR_S * s.S:
        return _slot_bound(ri, ev)
    kv_txt = "" if s.kv is not None else "; KV usage is unknown (the engine exports none)"
    saturated = _saturated(s)
    ev.extend(busy_evidence(s))
    if saturated:
        return make_verdict(
            ri,
            "capacity",
            "Queueing: capacity",
            f"{fmt(s.Q)} requests wait with {fmt(s.R)} running, no slot or KV limit binding, and "
            f"the device busy ({fmt((s.busy or 0) * 100, 0)}%): the server is at capacity{kv_txt}.",
            ev,
            0.8,
            replica_fixes(ctx.engine),
        )
    return make_verdict(
        ri,
        "capacity",
        "Queueing: capacity (limiter unclear)",
        f"{fmt(s.Q)} requests wait with {fmt(s.R)} running but neither slots, KV nor the device "
        f"look saturated{kv_txt}; the engine's scheduler budget may be the limit.",
        ev,
        0.4,
        [
            *replica_fixes(ctx.engine)[:1],
            "check the scheduler's token budget (vLLM --max-num-batched-tokens, "
            "SGLang --chunked-prefill-size, TGI --max-batch-prefill-tokens)",
        ],
    )


def _slot_bound(ri: RuleInput, ev: list[Evidence]) -> Verdict:
    """The slots bind: the scrape's reading. The number to raise them to is the fitted
    model's (the run's one recommendation); without a model, memory's estimate if known."""
    s, ctx = ri.s, ri.ctx
    assert s.S is not None
    current = round(s.S)
    flag = slot_flag(ctx.engine)
    target, why = (None, "") if ri.sized_by_model else _physics_slots(ri)
    if target is not None:
        ev.append(evidence("recommended_slots", "recommended slots", target, "sequences", why))
    if s.kv is not None:
        kv_txt = f", KV at {fmt(s.kv * 100, 0)}%"
    else:
        kv_txt = ", KV usage unknown (the engine exports none)" if ctx.has_engine_metrics else ""
    head = f"{s.plateau.sentence()}. " if s.plateau is not None else ""
    how = (
        "R's plateau"
        if s.plateau is not None
        else "the fitted model"
        if "model" in s.S_source
        else "the capacity curve's shape"
        if "curve" in s.S_source
        else None
    )
    fixes: list[FixLine]
    if target is None:
        act = (
            "the fitted model sizes the fix (the run's recommendation)."
            if ri.sized_by_model
            else f"raise {flag} above {current}; the run gives no rate to size it by (bench "
            "an open-loop rate, or pass --model and --gpu for the physics)."
        )
        fixes = [
            (
                f"raise {flag} above {current}, then bench again to size it",
                action("slots", "up", from_value=current),
            )
        ]
        if how:
            fixes.append(
                f"the limit {current} was inferred from {how}; if {flag} is set "
                "otherwise, state it with --engine-slots N"
            )
    elif target > current:
        act = f"raise {flag} {current} \u2192 {target} ({why})."
        fixes = slot_fix(
            ctx.engine, current, target, ctx_per_slot=ctx.ctx_per_slot, why=why, inferred=how
        )
    else:  # memory holds no more sequences than the limit set
        act = f"memory holds {target} sequences ({why}), not more than {flag} {current}."
        down: Literal["down", "hold"] = "down" if target < current else "hold"
        fixes = [
            (
                f"keep {flag} at {target} or below ({why}); more replicas behind "
                "`infersight gateway` serve more",
                action("slots", down, from_value=current, to_value=target),
            )
        ]
    conf = 0.85 if s.plateau is None else 0.75
    if s.kv is None:
        conf -= 0.1  # a plateau could also be an unexported KV limit
    return make_verdict(
        ri,
        "slot_bound",
        "Queueing: slot-bound",
        f"{head}{fmt(s.R)} of {current} slots busy, {fmt(s.Q)} waiting{kv_txt}; {act}",
        ev,
        conf,
        fixes,
    )


def _saturated(s: EngineSignals) -> bool:
    if s.U is None:
        return False
    if s.busy_source.startswith("model FLOP/s"):
        return s.U >= SATURATED  # CPU engine: process CPU is the saturation signal
    return s.U >= SATURATED and (s.SM is None or s.SM >= ILLUSION_SM)


def _physics_slots(ri: RuleInput) -> tuple[int | None, str]:
    """Without a rate to size it by: what memory holds, as an estimate (physics alone)."""
    ctx, w = ri.ctx, ri.w
    if ctx.shape is None or ctx.device is None:
        return None, "no rate and no model or device to size it by"
    seq_ctx = ctx.ctx_per_slot or int((w.prompt_mean or 512) + (w.output_mean or 256))
    adv = recommend_slots(ctx.shape, ctx.device, ctx=seq_ctx)
    return adv.target, f"an estimate from physics alone: {adv.why()}"
