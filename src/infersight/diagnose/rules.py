"""The diagnosis rules of shared/design.md section 5, evaluated on one window."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from infersight.diagnose.context import RunContext
from infersight.diagnose.fixes import (
    kv_fixes,
    replica_fixes,
    slot_fix,
    slot_flag,
    under_loaded_fixes,
)
from infersight.diagnose.physics.floors import compute_knee
from infersight.diagnose.physics.hardware import GIB
from infersight.diagnose.signals import WindowStats
from infersight.diagnose.signals_engine import EngineSignals
from infersight.diagnose.verdict import Evidence, Verdict, Window

__all__ = ["RuleInput", "evaluate"]

#: Thresholds (design.md section 5); named so reports can cite them.
Q_SUSTAINED = 0.5  # fraction of samples with Q > 0
R_NEAR_S = 0.85
KV_FULL = 0.90
UNDER_R_OF_S = 0.25
BUSY_LOW = 0.50
SATURATED = 0.80
ERROR_RATE = 0.01
HOST_BUSY_MAX = 0.60
HOST_ITL_RATIO = 1.5
HOST_CPU = 90.0
ILLUSION_U, ILLUSION_SM = 0.85, 0.50
BW_RATIO = 2.0
PREFILL_RATIO = 2.5
#: Batches beyond this are not searched for the compute knee.
KNEE_LIMIT = 4096


@dataclass(slots=True)
class RuleInput:
    w: WindowStats
    s: EngineSignals
    ctx: RunContext
    level: str | None = None
    client_limited: bool | None = None
    client_reasons: list[str] = field(default_factory=list)
    agg: dict[str, Any] = field(default_factory=dict)


def _ev(name: str, value: Any, unit: str = "", source: str = "") -> Evidence:
    if isinstance(value, float) and not math.isfinite(value):
        value = None
    return Evidence(name=name, value=value, unit=unit, source=source)


def _f(x: float | None, nd: int = 1) -> str:
    return "n/a" if x is None else f"{x:.{nd}f}"


def _rq_evidence(ri: RuleInput) -> list[Evidence]:
    s, c = ri.s, ri.ctx
    out = [_ev("running (R)", s.R, "requests", s.rq_source),
           _ev("waiting (Q)", s.Q, "requests", s.rq_source)]
    if s.S is not None:
        out.append(_ev("slots (S)", s.S, "sequences", c.slots_source))
    if s.kv is not None:
        out.append(_ev("KV cache usage", s.kv, "fraction", "engine /metrics (engine.kv_cache_usage)"))
    return out


def _floor_evidence(ri: RuleInput) -> list[Evidence]:
    s, w = ri.s, ri.w
    out: list[Evidence] = []
    if s.itl_ratio is not None:
        out += [_ev("ITL p50", w.itl_p50, "s", w.itl_source),
                _ev("ITL floor", s.itl_floor, "s", s.floor_source),
                _ev("ITL / floor", s.itl_ratio, "x", "observed / roofline floor")]
    if s.ttft_ratio is not None:
        out += [_ev("TTFT p50 (from sent)", w.ttft_sent_p50, "s", "records"),
                _ev("TTFT floor (prefill)", s.ttft_floor, "s", s.floor_source),
                _ev("TTFT / floor", s.ttft_ratio, "x", "observed / prefill floor")]
    return out


def _conf(base: float, ri: RuleInput) -> float:
    c = base * (0.7 if ri.s.inferred else 1.0)
    if ri.w.n < 10:
        c *= 0.85
    return round(max(0.05, min(0.99, c)), 2)


def _inferred_note(ri: RuleInput) -> str:
    return (" Engine metrics were missing: R and Q were inferred from client-side in-flight "
            "counts, so confidence is lower." if ri.s.inferred else "")


def _verdict(ri: RuleInput, vid: str, title: str, summary: str, evidence: list[Evidence],
             base_conf: float, fixes: list[str]) -> Verdict:
    return Verdict(
        id=vid, title=title, summary=summary + _inferred_note(ri),
        window=Window(start=ri.w.t0, end=ri.w.t1), evidence=evidence + _floor_evidence(ri),
        confidence=_conf(base_conf, ri), fixes=fixes, level=ri.level, engine=ri.ctx.engine,
    )


# -- individual rules ---------------------------------------------------------------

def _client_limited(ri: RuleInput) -> Verdict | None:
    if not ri.client_limited:
        return None
    w, s = ri.w, ri.s
    ev = [_ev("schedule lag p99", w.lag_p99, "s", "records (sent - scheduled)"),
          _ev("load generator CPU", s.loadgen_cpu, "% of a core", "process.cpu_percent{name=loadgen}")]
    ev += [_ev("reason", r, "", "client-limited flag (design.md s.2)") for r in ri.client_reasons]
    why = "; ".join(ri.client_reasons) or "schedule lag / load generator CPU over limits"
    return _verdict(
        ri, "client_limited", "Benchmark client-limited",
        f"The load generator, not the server, limited this run ({why}); its latencies "
        f"include client delay (schedule lag p99 {_f((w.lag_p99 or 0) * 1000)} ms).",
        ev, 0.9,
        ["run the load generator with more worker processes (bench --workers) or on "
         "another host", "lower the per-process concurrency or request rate",
         "stop other CPU-heavy work on the load generator's host"],
    )


def _error_driven(ri: RuleInput) -> Verdict | None:
    w = ri.w
    total = w.n_ok + w.n_failed
    if not total or w.n_failed / total <= ERROR_RATE:
        return None
    rate = w.n_failed / total
    kind, count = w.errors.most_common(1)[0]
    ev = [_ev("error rate", rate, "fraction", "records"),
          _ev("failed requests", w.n_failed, "requests", "records")]
    ev += [_ev(f"errors: {k}", n, "requests", "records (error kind)") for k, n in w.errors.most_common(5)]
    ev += [_ev(f"from: {k}", n, "requests", "records (upstream label / HTTP status)")
           for k, n in w.error_sources.most_common(3)]
    if kind in w.error_example:
        ev.append(_ev(f"example {kind}", w.error_example[kind], "", "records (error_message)"))
    fixes = _error_fixes(kind, ri.ctx.engine)
    where = ", ".join(f"{k} {n}" for k, n in w.error_sources.most_common(3))
    return _verdict(
        ri, "error_driven", "Error-driven",
        f"{rate:.0%} of requests failed ({w.n_failed} of {total}); most are {kind} "
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
    if kind in ("ConnectError", "ResetError", "ReadError"):
        return ["the server is unreachable or dropping connections: check it is up, its "
                "connection limits and any proxy timeouts"]
    return ["see the error examples in the evidence; fix the cause before tuning throughput"]


def _queueing(ri: RuleInput) -> Verdict | None:
    s, ctx = ri.s, ri.ctx
    if s.Q is None or s.Q_frac is None or s.Q_frac < Q_SUSTAINED or s.Q < 0.5:
        return None
    ev = _rq_evidence(ri)
    kv_hi = s.kv_p90 is not None and s.kv_p90 >= KV_FULL
    if kv_hi or (s.P is not None and s.P > 0):
        ev.append(_ev("preemption rate", s.P, "1/s", "engine /metrics (engine.preemptions_total)"))
        why = (f"KV cache at {_f((s.kv_p90 or 0) * 100, 0)}% (p90)" if kv_hi
               else f"{_f(s.P, 2)} preemptions/s")
        return _verdict(
            ri, "kv_bound", "Queueing: KV-capacity-bound",
            f"{_f(s.Q)} requests wait while {_f(s.R)} run and the {why}: the KV cache, "
            "not the slot limit, caps concurrency.", ev, 0.85, kv_fixes(ctx.engine))
    if s.S is not None and s.R is not None and s.R >= R_NEAR_S * s.S:
        target, fits = _recommend_slots(ri)
        ev.append(_ev("recommended slots", target, "sequences", fits.strip(" ,;") or "demand"))
        kv_txt = f", KV at {_f((s.kv or 0) * 100, 0)}%" if s.kv is not None else ""
        return _verdict(
            ri, "slot_bound", "Queueing: slot-bound",
            f"Queueing is slot-bound: {_f(s.R)} of {s.S:.0f} slots busy, {_f(s.Q)} waiting"
            f"{kv_txt}; raise {slot_flag(ctx.engine)} to {target}{fits}.",
            ev, 0.85, slot_fix(ctx.engine, target, ctx_per_slot=ctx.ctx_per_slot, fits=fits))
    saturated = _saturated(s)
    ev.append(_ev("device busy", s.busy, "fraction", s.busy_source))
    if s.U is not None and s.busy is not s.U:
        ev.append(_ev("utilisation (U)", s.U, "fraction", "NVML gpu.utilization / process CPU"))
    if saturated:
        return _verdict(
            ri, "capacity", "Queueing: capacity",
            f"{_f(s.Q)} requests wait with {_f(s.R)} running, no slot or KV limit binding, and "
            f"the device busy ({_f((s.busy or 0) * 100, 0)}%): the server is at capacity.",
            ev, 0.8, replica_fixes(ctx.engine))
    return _verdict(
        ri, "capacity", "Queueing: capacity (limiter unclear)",
        f"{_f(s.Q)} requests wait with {_f(s.R)} running but neither slots, KV nor the device "
        "look saturated; the engine's scheduler budget may be the limit.",
        ev, 0.4, [*replica_fixes(ctx.engine)[:1],
                  "check the scheduler's token budget (vLLM --max-num-batched-tokens, "
                  "SGLang --chunked-prefill-size, TGI --max-batch-prefill-tokens)"])


def _saturated(s: EngineSignals) -> bool:
    if s.U is None:
        return False
    if s.busy_source.startswith("model FLOP/s"):
        return s.U >= SATURATED  # CPU engine: process CPU is the saturation signal
    return s.U >= SATURATED and (s.SM is None or s.SM >= ILLUSION_SM)


def _recommend_slots(ri: RuleInput) -> tuple[int, str]:
    s, ctx, w = ri.s, ri.ctx, ri.w
    S = int(s.S or 1)
    demand = max(S + 1, math.ceil(S + (s.Q_max or s.Q or 0)))
    shape, dev = ctx.shape, ctx.device
    if shape is None or dev is None:
        return demand, " if memory allows (pass --model and --gpu to check)"
    seq_ctx = ctx.ctx_per_slot or int((w.prompt_mean or 512) + (w.output_mean or 256))
    per_seq = shape.kv_bytes_for_context(seq_ctx)
    util = 0.8 if dev.kind == "cpu" else 0.9
    overhead = 0.0 if dev.kind == "cpu" else 1.5 * GIB
    budget = dev.total_memory * util - shape.weights_bytes() - overhead
    mem_max = int(budget // per_seq) if per_seq > 0 else demand
    target = max(S, min(demand, mem_max))
    if target <= S:
        return S, (f"; memory does not allow more ({per_seq / GIB:.2f} GiB of KV per "
                   f"{seq_ctx}-token sequence, {max(0.0, budget) / GIB:.1f} GiB free)")
    kv_total = target * per_seq / GIB
    fits = (f", which fits in memory ({target} x {seq_ctx}-token sequences = {kv_total:.2f} GiB "
            f"of KV, {budget / GIB:.1f} GiB free)")
    knee = compute_knee(shape, dev, context=seq_ctx / 2, limit=KNEE_LIMIT)
    if knee < target:
        fits += f"; decode turns compute-bound near {knee} sequences, so throughput gains taper beyond it"
    return target, fits


def _under_loaded(ri: RuleInput) -> Verdict | None:
    s = ri.s
    if s.Q is None or s.Q >= 0.1 or s.S is None or s.R is None or s.R >= UNDER_R_OF_S * s.S:
        return None
    low = [x for x in (s.U, s.SM) if x is not None]
    if not low or min(low) >= BUSY_LOW:
        return None
    ev = [*_rq_evidence(ri), _ev("device busy", s.busy, "fraction", s.busy_source)]
    if s.U is not None:
        ev.append(_ev("utilisation (U)", s.U, "fraction", "NVML gpu.utilization / engine process CPU"))
    if s.SM is not None:
        ev.append(_ev("SM activity / MFU", s.SM, "fraction", s.busy_source))
    return _verdict(
        ri, "under_loaded", "Under-loaded (request-starved)",
        f"The server waits for work: {_f(s.R)} of {s.S:.0f} slots busy, nothing queued, device "
        f"{min(low) * 100:.1f}% busy; throughput is limited by the offered load.",
        ev, 0.85, under_loaded_fixes(ri.ctx.engine, s.S))


def _host_starved(ri: RuleInput) -> Verdict | None:
    s = ri.s
    if ri.ctx.engine in ("embedded", "llamacpp") and not ri.ctx.has_gpu:
        return _cpu_engine_starved(ri)
    if not ri.ctx.has_gpu or not s.R or s.busy is None or s.busy >= HOST_BUSY_MAX:
        return None
    if s.itl_ratio is None or s.itl_ratio <= HOST_ITL_RATIO or (s.engine_cpu or 0) < HOST_CPU:
        return None
    ev = [*_rq_evidence(ri), _ev("GPU busy", s.busy, "fraction", s.busy_source),
          _ev("engine process CPU", s.engine_cpu, "% of a core", "process.cpu_percent{name=engine}")]
    return _verdict(
        ri, "host_starved", "Host/CPU-starved",
        f"The GPU is only {_f(s.busy * 100, 0)}% busy with {_f(s.R)} requests running while the "
        f"engine process uses {_f(s.engine_cpu, 0)}% of a core and ITL is {_f(s.itl_ratio)}x "
        "its floor: the CPU side (scheduling, detokenisation, HTTP) starves the GPU.",
        ev, 0.75,
        ["a faster host CPU / more cores for the serving process; keep other work off it",
         _host_fix(ri.ctx.engine), "move tokenisation/HTTP out of the engine process "
         "(more API server processes), disable per-request logging"])


def _cpu_engine_starved(ri: RuleInput) -> Verdict | None:
    """A CPU engine whose threads do not get the CPU: other processes take the host."""
    s = ri.s
    host = s.host_cpu
    if not s.R or s.U is None or host is None or s.itl_ratio is None:
        return None
    if s.U >= HOST_BUSY_MAX or host < HOST_CPU or s.itl_ratio <= HOST_ITL_RATIO:
        return None
    ev = [*_rq_evidence(ri),
          _ev("engine CPU share", s.U, "fraction of its threads", "process.cpu_percent{name=engine}"),
          _ev("host CPU", host, "%", "host.cpu_percent{cpu=all}"),
          _ev("load generator CPU", s.loadgen_cpu, "% of a core", "process.cpu_percent{name=loadgen}")]
    return _verdict(
        ri, "host_starved", "Host/CPU-starved",
        f"The engine's threads get only {s.U * 100:.0f}% of their cores while the host is "
        f"{host:.0f}% busy and ITL is {_f(s.itl_ratio)}x its floor: other processes take "
        "the CPU the engine needs.",
        ev, 0.7,
        ["keep other CPU-heavy work (including the load generator) off the engine's cores, "
         "e.g. taskset / cgroups", "lower the engine's -t to the cores it can really have",
         "or move the model to a GPU (-ngl 999)"])


def _host_fix(engine: str) -> str:
    return {"vllm": "vLLM: --async-scheduling (or --num-scheduler-steps on older versions), "
                    "--disable-log-requests, more --api-server-count",
            "sglang": "SGLang: raise --tokenizer-worker-num, enable overlap scheduling",
            "tgi": "TGI: fewer --max-concurrent-requests per router, more shards"}.get(
        engine, "larger batches so each CPU-side step feeds more GPU work")


def _busy_illusion(ri: RuleInput) -> Verdict | None:
    s = ri.s
    if not ri.ctx.has_gpu or s.U is None or s.SM is None:
        return None
    if s.U < ILLUSION_U or s.SM > ILLUSION_SM:
        return None
    ev = [_ev("utilisation (U)", s.U, "fraction", "NVML gpu.utilization"),
          _ev("SM activity", s.SM, "fraction", "NVML GPM gpu.sm_activity"), *_rq_evidence(ri)]
    return _verdict(
        ri, "busy_illusion", "\"100% busy\" illusion",
        f"NVML says the GPU is {s.U * 100:.0f}% utilised, but only {s.SM * 100:.0f}% of its SMs "
        "are active: utilisation counts time with any kernel running, not how much of the GPU "
        "it used. There is headroom.",
        ev, 0.8,
        [f"raise the batch ({slot_flag(ri.ctx.engine)}) or offered concurrency: the GPU has idle SMs",
         "alert on SM activity (DCGM/GPM), not on nvidia-smi utilisation"])


def _bandwidth_decode(ri: RuleInput) -> Verdict | None:
    s, w = ri.s, ri.w
    if s.itl_ratio is None or s.itl_floor_bw is None or s.itl_floor_compute is None:
        return None
    if s.itl_floor_bw < s.itl_floor_compute or s.itl_ratio > BW_RATIO:
        return None
    if w.e2e_sent_p50 and w.ttft_sent_p50 is not None and w.ttft_sent_p50 > 0.5 * w.e2e_sent_p50:
        return None  # not decode-dominated
    knee = None
    if ri.ctx.shape is not None and ri.ctx.device is not None:
        ctx_t = (w.prompt_mean or 0) + (w.output_mean or 0) / 2
        knee = compute_knee(ri.ctx.shape, ri.ctx.device, context=ctx_t, limit=KNEE_LIMIT)
    ev = [_ev("bandwidth floor", s.itl_floor_bw, "s", s.floor_source),
          _ev("compute floor", s.itl_floor_compute, "s", s.floor_source),
          _ev("running (R)", s.R, "requests", s.rq_source),
          _ev("compute knee", knee, "sequences", "batch where compute floor = bandwidth floor")]
    return _verdict(
        ri, "bandwidth_bound_decode", "Memory-bandwidth-bound decode",
        f"Decode runs at {_f(s.itl_ratio)}x the memory-bandwidth floor (ITL {_f((w.itl_p50 or 0) * 1000)} ms "
        f"vs {_f(s.itl_floor_bw * 1000, 2)} ms): each step streams the weights and KV. Batching "
        + (f"raises throughput at almost no ITL cost until about {knee} sequences."
           if knee and knee < KNEE_LIMIT else
           "raises throughput at little ITL cost; at this context the KV reads keep decode "
           "memory-bound at any batch size."),
        ev, 0.7,
        [f"batch more sequences per step ({slot_flag(ri.ctx.engine)}, more client concurrency)",
         "quantised weights (fp8 / int4) and an fp8 KV cache cut the bytes per step",
         "speculative decoding trades spare compute for fewer steps"])


def _compute_prefill(ri: RuleInput) -> Verdict | None:
    s, w = ri.s, ri.w
    if s.ttft_floor is None or w.ttft_sent_p50 is None or not w.e2e_sent_p50:
        return None
    if w.ttft_sent_p50 < 0.5 * w.e2e_sent_p50 or (s.Q or 0) >= 0.5:
        return None
    share = w.ttft_sent_p50 / w.e2e_sent_p50
    concurrent = max(1.0, (s.R or 1.0) * share)
    ratio = w.ttft_sent_p50 / (s.ttft_floor * concurrent)
    if ratio > PREFILL_RATIO:
        return None
    ev = [_ev("TTFT share of e2e", share, "fraction", "records"),
          _ev("prompt tokens (mean)", w.prompt_mean, "tokens", "records (usage)"),
          _ev("concurrent prefills", concurrent, "requests", "R x TTFT share"),
          _ev("TTFT / (floor x concurrent prefills)", ratio, "x", s.floor_source)]
    eng = ri.ctx.engine
    chunk = {"vllm": "--enable-chunked-prefill with a larger --max-num-batched-tokens",
             "sglang": "--chunked-prefill-size", "tgi": "--max-batch-prefill-tokens",
             "llamacpp": "--batch-size / --ubatch-size", "embedded": "more threads (-t)"}.get(
        eng, "the engine's prefill token budget")
    cache = {"vllm": "--enable-prefix-caching", "llamacpp": "--cache-reuse 256"}.get(
        eng, "prefix caching")
    return _verdict(
        ri, "compute_bound_prefill", "Compute-bound prefill",
        f"TTFT is {share:.0%} of each request and sits at {ratio:.1f}x the prefill compute floor "
        f"for {_f(w.prompt_mean, 0)}-token prompts: prefill is limited by FLOP/s.",
        ev, 0.7,
        [f"reuse shared prefixes ({cache}) so fewer tokens are prefilled",
         f"tune the prefill budget ({chunk}) to overlap prefill with decode",
         "fp8 weights/compute or tensor parallelism for more FLOP/s; shorter prompts"])


RULES = (_client_limited, _error_driven, _queueing, _host_starved, _busy_illusion,
         _under_loaded, _compute_prefill, _bandwidth_decode)


def evaluate(ri: RuleInput) -> list[Verdict]:
    """Every verdict that fires on this window, or one ``healthy`` verdict."""
    out = [v for rule in RULES if (v := rule(ri)) is not None]
    if out:
        return out
    s, w = ri.s, ri.w
    parts = [f"{w.n} requests, {w.n_failed} errors"]
    if s.R is not None:
        parts.append(f"R {_f(s.R)}" + (f" of {s.S:.0f} slots" if s.S else ""))
    if s.Q is not None:
        parts.append(f"Q {_f(s.Q)}")
    if s.itl_ratio is not None:
        parts.append(f"ITL {_f(s.itl_ratio)}x floor")
    ev = [*_rq_evidence(ri), _ev("device busy", s.busy, "fraction", s.busy_source)]
    return [_verdict(ri, "healthy", "Healthy",
                     "No limiter found: " + ", ".join(parts) + ".", ev, 0.7, [])]
