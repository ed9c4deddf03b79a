"""Load-side rules: client-limited, error-driven, queueing (KV, slots, capacity),
under-loaded (docs/design.md section 5)."""

from __future__ import annotations

from infersight.core.server_model import action
from infersight.core.verdicts import Evidence, Verdict, is_marginal
from infersight.diagnose.fixes import (
    kv_fixes,
    replica_fixes,
    slot_fix,
    slot_flag,
    under_loaded_fixes,
)
from infersight.diagnose.physics.slots import recommend_slots
from infersight.diagnose.rules_base import (
    BUSY_LOW,
    ERROR_RATE,
    ILLUSION_SM,
    KV_FULL,
    R_NEAR_S,
    SATURATED,
    UNDER_R_OF_S,
    FixLine,
    RuleInput,
    evidence,
    fmt,
    make_verdict,
    rq_evidence,
)
from infersight.diagnose.rules_curve import compute_fixes
from infersight.diagnose.signals_engine import Q_SUSTAINED, EngineSignals

__all__ = ["client_limited", "error_driven", "queueing", "under_loaded"]


def client_limited(ri: RuleInput) -> Verdict | None:
    if not ri.client_limited:
        return None
    w, s = ri.w, ri.s
    ev = [
        evidence(
            "schedule_lag_p99", "schedule lag p99", w.lag_p99, "s", "records (sent - scheduled)"
        ),
        evidence(
            "loadgen_cpu",
            "load generator CPU",
            s.loadgen_cpu,
            "% of a core",
            "process.cpu_percent{name=loadgen}",
        ),
    ]
    ev += [
        evidence(
            "reason", "reason", r, "", "client-limited check (schedule lag and client CPU limits)"
        )
        for r in ri.client_reasons
    ]
    why = "; ".join(ri.client_reasons) or "schedule lag / load generator CPU over limits"
    margin = (
        " Every flag clears its limit by less than 20%: the figures are very likely the server's."
        if ri.client_marginal
        else ""
    )
    contention = (ri.agg.get("client_limited") or {}).get("contention")
    if contention:  # docs/design.md s.2: name the contention, do not blame the client alone
        # Each stored reason ends by naming the contention; the sentence names it once.
        tail = f", while {contention} (contention, not the client alone)"
        slipped = "; ".join(r.removesuffix(tail) for r in ri.client_reasons) or why
        return make_verdict(
            ri,
            "client_limited",
            "Benchmark client and server share cores",
            f"The load generator's schedule slipped ({slipped}): the figures include the "
            f"time each side waited for the other's CPU, not the server's alone.{margin}",
            ev,
            0.8,
            [
                "run the load generator on another host (or pin client and engine to "
                "separate cores) to measure the server alone",
                "give the engine fewer threads than the host has cores",
            ],
            marginal=ri.client_marginal,
        )
    return make_verdict(
        ri,
        "client_limited",
        "Benchmark client-limited",
        f"The load generator, not the server, limited this run ({why}); its latencies "
        f"include client delay (schedule lag p99 {fmt((w.lag_p99 or 0) * 1000)} ms).{margin}",
        ev,
        0.9,
        [
            "run the load generator with more worker processes (bench --workers) or on "
            "another host",
            "lower the per-process concurrency or request rate",
            "stop other CPU-heavy work on the load generator's host",
        ],
        marginal=ri.client_marginal,
    )


def error_driven(ri: RuleInput) -> Verdict | None:
    w = ri.w
    total = w.n_ok + w.n_failed
    if not total or w.n_failed / total <= ERROR_RATE:
        return None
    rate = w.n_failed / total
    kind, count = w.errors.most_common(1)[0]
    ev = [
        evidence("error_rate", "error rate", rate, "fraction", "records"),
        evidence("failed_requests", "failed requests", w.n_failed, "requests", "records"),
    ]
    ev += [
        evidence(f"errors.{k}", f"errors: {k}", n, "requests", "records (error kind)")
        for k, n in w.errors.most_common(5)
    ]
    ev += [
        evidence(f"from.{k}", f"from: {k}", n, "requests", "records (upstream label / HTTP status)")
        for k, n in w.error_sources.most_common(3)
    ]
    if kind in w.error_example:
        ev.append(
            evidence(
                f"example.{kind}",
                f"example {kind}",
                w.error_example[kind],
                "",
                "records (error_message)",
            )
        )
    fixes = _error_fixes(kind, ri.ctx.engine)
    if kind in ("Overloaded", "RateLimited") and not _under_pressure(ri):
        fixes.insert(
            0,
            f"the {kind} answers come while the server keeps up with the load "
            "(no queue, no rate it fell behind): find what sheds them (a proxy's or "
            "the server's own admission limits, a health check) before adding capacity",
        )
    where = ", ".join(f"{k} ({n})" for k, n in w.error_sources.most_common(3))
    return make_verdict(
        ri,
        "error_driven",
        "Error-driven",
        # as precise as the evidence: 3 of 200 is 1.5%, not "2%"
        f"{rate * 100:.3g}% of requests failed ({w.n_failed} of {total}); most are {kind} "
        f"({count}), from {where}.",
        ev,
        min(0.99, 0.75 + rate / 4),
        fixes,
        marginal=is_marginal(rate, ERROR_RATE),
    )


def _under_pressure(ri: RuleInput) -> bool:
    """Whether the level showed load: a queue, or a rate it could not keep up with."""
    sus = ri.agg.get("sustainability") if isinstance(ri.agg, dict) else None
    if isinstance(sus, dict) and sus.get("sustainable") is False:
        return True
    return ri.s.Q is not None and ri.s.Q >= 0.5


def _error_fixes(kind: str, engine: str) -> list[str]:
    if kind == "AuthError":
        return [
            "the API key does not match the server's: check INFERSIGHT_API_KEY / "
            "--api-key-env / --api-key-file on the client and the server's key "
            "(a placeholder or expired key is the usual cause)"
        ]
    if kind == "RateLimited":
        return [
            "lower concurrency or rate below the provider's limit, or ask for a higher quota",
            "let `infersight gateway` queue and pace requests; its retries honour Retry-After",
        ]
    if kind == "Overloaded":
        return [
            "the server sheds load: raise its capacity (replicas) or lower offered load",
            "tune the gateway's concurrency limit and queue bound so it queues instead of 503",
        ]
    if kind in ("FirstTokenTimeout", "IdleTimeout", "DeadlineExceeded", "ConnectTimeout"):
        return [
            "requests wait too long: the server is queueing (see the queueing verdicts) "
            "or the timeouts are tighter than its latency",
            "raise the timeouts, or reduce load / add replicas",
        ]
    if kind == "BadRequest":
        flag = {
            "vllm": "--max-model-len",
            "sglang": "--context-length",
            "tgi": "--max-total-tokens",
            "llamacpp": "--ctx-size",
            "embedded": "infersight serve --ctx",
        }.get(engine, "the context limit")
        return [
            "read the server's message in the evidence; prompt + max_tokens above the "
            f"context limit is common: raise {flag} or lower max_tokens"
        ]
    if kind == "OutOfMemory":
        return [
            "the engine runs out of memory: see the memory-pressure verdict for the "
            "slot and context settings that fit"
        ]
    if kind in ("ConnectError", "ResetError", "ReadError"):
        return [
            "the server is unreachable or dropping connections: check it is up, its "
            "connection limits and any proxy timeouts"
        ]
    return ["see the error examples in the evidence; fix the cause before tuning throughput"]


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
    if fix is not None and fix.limiter == "compute":
        # the slots are full, but the model says more of them buy no throughput: the
        # limit is the engine's compute, whatever the queue in front of it
        return make_verdict(
            ri,
            "compute_bound",
            "Compute-bound (the fitted model)",
            f"{fmt(s.R)} of {current} slots busy, {fmt(s.Q)} waiting; {fix.limiter_why}.",
            ev,
            0.8,
            compute_fixes(ri),
        )
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


def _cpu_idle(ri: RuleInput) -> tuple[bool, str, float]:
    """A CPU engine without a calibrated compute ceiling: its threads spin, so its CPU
    use says nothing. Below half the measured knee it has room; with no knee measured,
    how busy it is stays unknown (said so, at lower confidence)."""
    s, curve = ri.s, ri.curve
    if curve is not None and curve.knee_reached and curve.knee:
        if (s.R or 0.0) >= 0.5 * curve.knee:
            return False, "", 0.0
        return True, f"below half the measured knee ({curve.knee:.3g} in flight)", 0.85
    return (
        True,
        (
            "compute use unknown: the run measured no knee to calibrate the CPU's "
            "ceiling, and spinning threads make CPU use say nothing"
        ),
        0.6,
    )


def under_loaded(ri: RuleInput) -> Verdict | None:
    s = ri.s
    if s.Q is None or s.Q >= 0.1 or s.S is None or s.R is None or s.R >= UNDER_R_OF_S * s.S:
        return None
    low = [x for x in (s.U, s.SM) if x is not None]
    if ri.ctx.engine in ("embedded", "llamacpp") and not ri.ctx.has_gpu and s.SM is None:
        idle, busy_txt, conf = _cpu_idle(ri)
        if not idle:
            return None
        return make_verdict(
            ri,
            "under_loaded",
            "Under-loaded (request-starved)",
            f"The server waits for work: {fmt(s.R)} of {s.S:.0f} slots busy, nothing queued, "
            f"{busy_txt}; throughput is limited by the offered load.",
            rq_evidence(ri),
            conf,
            under_loaded_fixes(ri.ctx.engine, s.S),
        )
    if not low or min(low) >= BUSY_LOW:
        return None
    ev = [
        *rq_evidence(ri),
        evidence("device_busy", "device busy", s.busy, "fraction", s.busy_source),
    ]
    if s.U is not None:
        ev.append(
            evidence(
                "utilisation",
                "utilisation (U)",
                s.U,
                "fraction",
                "NVML gpu.utilization / engine process CPU",
            )
        )
    if s.SM is not None:
        ev.append(evidence("sm_activity", "SM activity / MFU", s.SM, "fraction", s.busy_source))
    return make_verdict(
        ri,
        "under_loaded",
        "Under-loaded (request-starved)",
        f"The server waits for work: {fmt(s.R)} of {s.S:.0f} slots busy, nothing queued, "
        f"{'compute used (MFU)' if s.busy_source.startswith('model FLOP') else 'device busy'} "
        f"{min(low) * 100:.1f}%; throughput is limited by the offered load.",
        ev,
        0.85,
        under_loaded_fixes(ri.ctx.engine, s.S),
    )
