"""The queueing rule: KV-, slot- and capacity-bound levels (docs/design.md section 5)."""

from __future__ import annotations

from infersight.core.server_model import action
from infersight.core.verdicts import Evidence, Verdict
from infersight.diagnose.fixes import (
    kv_fixes,
    replica_fixes,
    slot_fix,
    slot_flag,
)
from infersight.diagnose.physics.slots import recommend_slots
from infersight.diagnose.rules_base import (
    ILLUSION_SM,
    KV_FULL,
    R_NEAR_S,
    SATURATED,
    FixLine,
    RuleInput,
    evidence,
    fmt,
    make_verdict,
    rq_evidence,
)
from infersight.diagnose.signals_engine import Q_SUSTAINED, EngineSignals

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
    ev.append(evidence("device_busy", "device busy", s.busy, "fraction", s.busy_source))
    if s.U is not None and s.busy is not s.U:
        ev.append(
            evidence(
                "utilisation",
                "utilisation (U)",
                s.U,
                "fraction",
                "NVML gpu.utilization / process CPU",
            )
        )
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
    s, ctx, fix = ri.s, ri.ctx, ri.fix
    assert s.S is not None
    current = round(s.S)
    flag = slot_flag(ctx.engine)
    if fix is not None:
        target: int | None = fix.slots
        why, short = fix.why(), fix.short()
        ev.append(evidence("recommended_slots", "recommended slots", fix.slots, "sequences", why))
        ev.append(
            evidence(
                "needed_inflight",
                "running at the fix (the model)",
                fix.needed,
                "requests",
                "the fitted model's simulation at the run's load",
            )
        )
        if (fix.replicas or 1) > 1:
            ev.append(evidence("replicas", "replicas needed", fix.replicas, "servers", why))
    else:
        target, why = _physics_slots(ri)
        short = why
        if target is not None:
            ev.append(evidence("recommended_slots", "recommended slots", target, "sequences", why))
    if s.kv is not None:
        kv_txt = f", KV at {fmt(s.kv * 100, 0)}%"
    else:
        kv_txt = ", KV usage unknown (the engine exports none)" if ctx.has_engine_metrics else ""
    head = f"{s.plateau.sentence()}. " if s.plateau is not None else ""
    fixes: list[FixLine] = []
    up = action("slots", "up", from_value=current)
    how = (
        "R's plateau"
        if s.plateau is not None
        else "the fitted model"
        if "model" in s.S_source
        else "the capacity curve's shape"
        if "curve" in s.S_source
        else None
    )
    if target is None and fix is not None and fix.no_number:
        act = (
            f"raise {flag} above {current} (no number beyond the measured range: {fix.no_number})."
        )
        fixes = [
            (f"raise {flag} above {current}, then bench again to size it ({fix.no_number})", up)
        ]
    elif target is None:
        act = (
            f"raise {flag} above {current}; the run gives no rate to size it by "
            "(bench an open-loop rate, or pass --model and --gpu for the physics)."
        )
        fixes = [(f"raise {flag} above {current}, then bench again to size it", up)]
    elif target > current:
        act = f"raise {flag} {current} \u2192 {target} ({short})."
        fixes = slot_fix(
            ctx.engine, current, target, ctx_per_slot=ctx.ctx_per_slot, why=short, inferred=how
        )
    elif target == current and fix is not None and (fix.no_number or (fix.replicas or 1) > 1):
        # the model's fix is replicas: more slots within the measured range would not
        # serve the load
        many = f"run {fix.replicas} replicas" if fix.replicas else "run more replicas"
        tail = f" (no number beyond the measured range: {fix.no_number})" if fix.no_number else ""
        act = (
            f"more than {flag} {current} within what the run measured would not serve "
            f"the load: {many} behind `infersight gateway`{tail}."
        )
        fixes = [
            (
                f"{many} behind `infersight gateway`{tail}",
                action("replicas", "up", from_value=1, to_value=fix.replicas),
            ),
            *replica_fixes(ctx.engine)[1:2],
        ]
    elif target == current:
        act = f"{flag} {current} already covers what the load needs in flight ({short})."
        # Every verdict carries a fix: here the waits are bursts above the average.
        fixes = [
            (
                f"keep {flag} at {current}: it covers what the load needs in flight "
                f"({short}); the requests that waited came in bursts, which a bounded "
                "queue in front of it (`infersight gateway`) smooths",
                action("slots", "hold", from_value=current, to_value=current),
            )
        ]
    else:  # the knee or memory bounds it below the limit set
        act = f"the run puts the limit at {target}, below {flag} {current} ({short})."
        fixes = [
            (
                f"lower {flag} {current} \u2192 {target} ({short}): more sequences than "
                "that add latency, not throughput",
                action("slots", from_value=current, to_value=target),
            )
        ]
    if target is None and how:
        fixes.append(
            f"the limit {current} was inferred from {how}; if {flag} is set "
            "otherwise, state it with --engine-slots N"
        )
    if fix is not None and (fix.replicas or 1) > 1 and target != current:
        act += (
            f" At {target} slots one server serves about {fix.per_replica:.3g} req/s of "
            f"the {fix.target_rate:.3g} needed: run {fix.replicas} replicas."
        )
        fixes.append(
            (
                replica_fixes(ctx.engine)[0],
                action("replicas", "up", from_value=1, to_value=fix.replicas),
            )
        )
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
