"""Load-side rules: client-limited, error-driven, queueing (KV, slots, capacity),
under-loaded (docs/design.md section 5)."""

from __future__ import annotations

import math

from infersight.core.verdicts import Evidence, Verdict
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
    RuleInput,
    evidence,
    fmt,
    make_verdict,
    rq_evidence,
)
from infersight.diagnose.signals_engine import Q_SUSTAINED, EngineSignals

__all__ = ["client_limited", "error_driven", "queueing", "under_loaded"]


def client_limited(ri: RuleInput) -> Verdict | None:
    if not ri.client_limited:
        return None
    w, s = ri.w, ri.s
    ev = [evidence("schedule_lag_p99", "schedule lag p99", w.lag_p99, "s", "records (sent - scheduled)"),
          evidence("loadgen_cpu", "load generator CPU", s.loadgen_cpu, "% of a core", "process.cpu_percent{name=loadgen}")]
    ev += [evidence("reason", "reason", r, "", "client-limited check (schedule lag and client CPU limits)") for r in ri.client_reasons]
    why = "; ".join(ri.client_reasons) or "schedule lag / load generator CPU over limits"
    contention = (ri.agg.get("client_limited") or {}).get("contention")
    if contention:  # docs/design.md s.2: name the contention, do not blame the client alone
        # Each stored reason ends by naming the contention; the sentence names it once.
        tail = f", while {contention} (contention, not the client alone)"
        slipped = "; ".join(r.removesuffix(tail) for r in ri.client_reasons) or why
        return make_verdict(
            ri, "client_limited", "Benchmark client and server share cores",
            f"The load generator's schedule slipped ({slipped}): the figures include the "
            "time each side waited for the other's CPU, not the server's alone.", ev, 0.8,
            ["run the load generator on another host (or pin client and engine to "
             "separate cores) to measure the server alone",
             "give the engine fewer threads than the host has cores"])
    return make_verdict(
        ri, "client_limited", "Benchmark client-limited",
        f"The load generator, not the server, limited this run ({why}); its latencies "
        f"include client delay (schedule lag p99 {fmt((w.lag_p99 or 0) * 1000)} ms).",
        ev, 0.9,
        ["run the load generator with more worker processes (bench --workers) or on "
         "another host", "lower the per-process concurrency or request rate",
         "stop other CPU-heavy work on the load generator's host"],
    )


def error_driven(ri: RuleInput) -> Verdict | None:
    w = ri.w
    total = w.n_ok + w.n_failed
    if not total or w.n_failed / total <= ERROR_RATE:
        return None
    rate = w.n_failed / total
    kind, count = w.errors.most_common(1)[0]
    ev = [evidence("error_rate", "error rate", rate, "fraction", "records"),
          evidence("failed_requests", "failed requests", w.n_failed, "requests", "records")]
    ev += [evidence(f"errors.{k}", f"errors: {k}", n, "requests", "records (error kind)") for k, n in w.errors.most_common(5)]
    ev += [evidence(f"from.{k}", f"from: {k}", n, "requests", "records (upstream label / HTTP status)")
           for k, n in w.error_sources.most_common(3)]
    if kind in w.error_example:
        ev.append(evidence(f"example.{kind}", f"example {kind}", w.error_example[kind], "", "records (error_message)"))
    fixes = _error_fixes(kind, ri.ctx.engine)
    where = ", ".join(f"{k} ({n})" for k, n in w.error_sources.most_common(3))
    return make_verdict(
        ri, "error_driven", "Error-driven",
        # as precise as the evidence: 3 of 200 is 1.5%, not "2%"
        f"{rate * 100:.3g}% of requests failed ({w.n_failed} of {total}); most are {kind} "
        f"({count}), from {where}.",
        ev, min(0.99, 0.75 + rate / 4), fixes,
    )


def _error_fixes(kind: str, engine: str) -> list[str]:
    if kind == "AuthError":
        return ["the API key does not match the server's: check INFERSIGHT_API_KEY / "
                "--api-key-env / --api-key-file on the client and the server's key "
                "(a placeholder or expired key is the usual cause)"]
    if kind == "RateLimited":
        return ["lower concurrency or rate below the provider's limit, or ask for a higher quota",
                "let `infersight gateway` queue and pace requests; its retries honour Retry-After"]
    if kind == "Overloaded":
        return ["the server sheds load: raise its capacity (replicas) or lower offered load",
                "tune the gateway's concurrency limit and queue bound so it queues instead of 503"]
    if kind in ("FirstTokenTimeout", "IdleTimeout", "DeadlineExceeded", "ConnectTimeout"):
        return ["requests wait too long: the server is queueing (see the queueing verdicts) "
                "or the timeouts are tighter than its latency", "raise the timeouts, or "
                "reduce load / add replicas"]
    if kind == "BadRequest":
        flag = {"vllm": "--max-model-len", "sglang": "--context-length",
                "tgi": "--max-total-tokens", "llamacpp": "--ctx-size",
                "embedded": "infersight serve --ctx"}.get(engine, "the context limit")
        return ["read the server's message in the evidence; prompt + max_tokens above the "
                f"context limit is common: raise {flag} or lower max_tokens"]
    if kind == "OutOfMemory":
        return ["the engine runs out of memory: see the memory-pressure verdict for the "
                "slot and context settings that fit"]
    if kind in ("ConnectError", "ResetError", "ReadError"):
        return ["the server is unreachable or dropping connections: check it is up, its "
                "connection limits and any proxy timeouts"]
    return ["see the error examples in the evidence; fix the cause before tuning throughput"]


def queueing(ri: RuleInput) -> Verdict | None:
    s, ctx = ri.s, ri.ctx
    if s.Q is None or s.Q_frac is None or s.Q_frac < Q_SUSTAINED or s.Q < 0.5:
        return None
    ev = rq_evidence(ri)
    # An engine that exports no KV usage is never called KV-bound (docs/design.md section 5).
    kv_hi = s.kv_p90 is not None and s.kv_p90 >= KV_FULL
    if s.kv is not None and (kv_hi or (s.P is not None and s.P > 0)):
        ev.append(evidence("preemption_rate", "preemption rate", s.P, "1/s", "engine /metrics (engine.preemptions_total)"))
        why = (f"KV cache at {fmt((s.kv_p90 or 0) * 100, 0)}% (p90)" if kv_hi
               else f"{fmt(s.P, 2)} preemptions/s")
        return make_verdict(
            ri, "kv_bound", "Queueing: KV-capacity-bound",
            f"{fmt(s.Q)} requests wait while {fmt(s.R)} run and the {why}: the KV cache, "
            "not the slot limit, caps concurrency.", ev, 0.85, kv_fixes(ctx.engine))
    if s.S is not None and s.R is not None and s.R >= R_NEAR_S * s.S:
        return _slot_bound(ri, ev)
    kv_txt = "" if s.kv is not None else "; KV usage is unknown (the engine exports none)"
    saturated = _saturated(s)
    ev.append(evidence("device_busy", "device busy", s.busy, "fraction", s.busy_source))
    if s.U is not None and s.busy is not s.U:
        ev.append(evidence("utilisation", "utilisation (U)", s.U, "fraction", "NVML gpu.utilization / process CPU"))
    if saturated:
        return make_verdict(
            ri, "capacity", "Queueing: capacity",
            f"{fmt(s.Q)} requests wait with {fmt(s.R)} running, no slot or KV limit binding, and "
            f"the device busy ({fmt((s.busy or 0) * 100, 0)}%): the server is at capacity{kv_txt}.",
            ev, 0.8, replica_fixes(ctx.engine))
    return make_verdict(
        ri, "capacity", "Queueing: capacity (limiter unclear)",
        f"{fmt(s.Q)} requests wait with {fmt(s.R)} running but neither slots, KV nor the device "
        f"look saturated{kv_txt}; the engine's scheduler budget may be the limit.",
        ev, 0.4, [*replica_fixes(ctx.engine)[:1],
                  "check the scheduler's token budget (vLLM --max-num-batched-tokens, "
                  "SGLang --chunked-prefill-size, TGI --max-batch-prefill-tokens)"])


def _slot_bound(ri: RuleInput, ev: list[Evidence]) -> Verdict:
    s, ctx = ri.s, ri.ctx
    assert s.S is not None
    current = round(s.S)
    demand = max(current + 1, math.ceil(current + (s.Q_max or s.Q or 0)))
    target, why = _recommend_slots(ri, demand)
    ev.append(evidence("recommended_slots", "recommended slots", target, "sequences", why))
    ev.append(evidence("demand", "demand (R + Q, max)", demand, "requests", s.rq_source))
    if s.kv is not None:
        kv_txt = f", KV at {fmt(s.kv * 100, 0)}%"
    else:
        kv_txt = ", KV usage unknown (the engine exports none)" if ctx.has_engine_metrics else ""
    head = f"{s.plateau.sentence()}. " if s.plateau is not None else ""
    fixes: list[str] = []
    if target > current:
        act = f"raise {slot_flag(ctx.engine)} {current} \u2192 {target}, {why}."
        fixes = slot_fix(ctx.engine, current, target, ctx_per_slot=ctx.ctx_per_slot, why=why,
                         inferred=s.plateau is not None)
    else:
        act = f"{slot_flag(ctx.engine)} {current} cannot usefully go higher: {why}."
    if target < demand:
        act += (f" Up to {demand} requests were in the system: beyond {target} slots they "
                "queue, so add replicas for the rest.")
        fixes += replica_fixes(ctx.engine)
    conf = 0.85 if s.plateau is None else 0.75
    if s.kv is None:
        conf -= 0.1  # a plateau could also be an unexported KV limit
    return make_verdict(
        ri, "slot_bound", "Queueing: slot-bound",
        f"{head}{fmt(s.R)} of {current} slots busy, {fmt(s.Q)} waiting{kv_txt}; {act}",
        ev, conf, fixes)


def _saturated(s: EngineSignals) -> bool:
    if s.U is None:
        return False
    if s.busy_source.startswith("model FLOP/s"):
        return s.U >= SATURATED  # CPU engine: process CPU is the saturation signal
    return s.U >= SATURATED and (s.SM is None or s.SM >= ILLUSION_SM)


def _recommend_slots(ri: RuleInput, demand: int) -> tuple[int, str]:
    """The shared recommendation (physics.slots, as `plan` gives it); without the model
    and device, the demand this window saw."""
    ctx, w = ri.ctx, ri.w
    shape, dev = ctx.shape, ctx.device
    if shape is None or dev is None:
        return demand, "the demand seen, if memory allows (pass --model and --gpu to check)"
    seq_ctx = ctx.ctx_per_slot or int((w.prompt_mean or 512) + (w.output_mean or 256))
    adv = recommend_slots(shape, dev, ctx=seq_ctx)
    return adv.target, adv.why()


def under_loaded(ri: RuleInput) -> Verdict | None:
    s = ri.s
    if s.Q is None or s.Q >= 0.1 or s.S is None or s.R is None or s.R >= UNDER_R_OF_S * s.S:
        return None
    low = [x for x in (s.U, s.SM) if x is not None]
    if not low or min(low) >= BUSY_LOW:
        return None
    ev = [*rq_evidence(ri), evidence("device_busy", "device busy", s.busy, "fraction", s.busy_source)]
    if s.U is not None:
        ev.append(evidence("utilisation", "utilisation (U)", s.U, "fraction", "NVML gpu.utilization / engine process CPU"))
    if s.SM is not None:
        ev.append(evidence("sm_activity", "SM activity / MFU", s.SM, "fraction", s.busy_source))
    return make_verdict(
        ri, "under_loaded", "Under-loaded (request-starved)",
        f"The server waits for work: {fmt(s.R)} of {s.S:.0f} slots busy, nothing queued, "
        f"{'compute used (MFU)' if s.busy_source.startswith('model FLOP') else 'device busy'} "
        f"{min(low) * 100:.1f}%; throughput is limited by the offered load.",
        ev, 0.85, under_loaded_fixes(ri.ctx.engine, s.S))
