"""Device-side rules: host-starved, "100% busy" illusion, bandwidth-bound decode,
compute-bound prefill (docs/design.md sections 5 and 6)."""

from __future__ import annotations

from infersight.core.server_model import action
from infersight.core.verdicts import Verdict
from infersight.diagnose.fixes import slot_flag
from infersight.diagnose.physics.floors import compute_knee
from infersight.diagnose.rules.base import (
    BW_RATIO,
    HOST_BUSY_MAX,
    HOST_CPU,
    HOST_ITL_RATIO,
    ILLUSION_SM,
    ILLUSION_U,
    KNEE_LIMIT,
    PREFILL_RATIO,
    RuleInput,
    evidence,
    fmt,
    loadgen_evidence,
    make_verdict,
    rq_evidence,
)

__all__ = [
    "bandwidth_decode",
    "busy_illusion",
    "compute_prefill",
    "host_starved",
]


def host_starved(ri: RuleInput) -> Verdict | None:
    s = ri.s
    if ri.ctx.engine in ("embedded", "llamacpp") and not ri.ctx.has_gpu:
        return _cpu_engine_starved(ri)
    if not ri.ctx.has_gpu or not s.R or s.busy is None or s.busy >= HOST_BUSY_MAX:
        return None
    if s.itl_ratio is None or s.itl_ratio <= HOST_ITL_RATIO or (s.engine_cpu or 0) < HOST_CPU:
        return None
    ev = [
        *rq_evidence(ri),
        evidence("device_busy", "GPU busy", s.busy, "fraction", s.busy_source),
        evidence(
            "engine_cpu",
            "engine process CPU",
            s.engine_cpu,
            "% of a core",
            "process.cpu_percent{name=engine}",
        ),
    ]
    return make_verdict(
        ri,
        "host_starved",
        "Host/CPU-starved",
        f"The GPU is only {fmt(s.busy * 100, 0)}% busy with {fmt(s.R)} requests running while the "
        f"engine process uses {fmt(s.engine_cpu, 0)}% of a core and ITL is {fmt(s.itl_ratio)}x "
        "its floor: the CPU side (scheduling, detokenisation, HTTP) starves the GPU.",
        ev,
        0.75,
        [
            "a faster host CPU / more cores for the serving process; keep other work off it",
            _host_fix(ri.ctx.engine),
            "move tokenisation/HTTP out of the engine process "
            "(more API server processes), disable per-request logging",
        ],
    )


def _cpu_engine_starved(ri: RuleInput) -> Verdict | None:
    """A CPU engine whose threads do not get the CPU: other processes take the host."""
    s = ri.s
    host = s.host_cpu
    if not s.R or s.U is None or host is None or s.itl_ratio is None:
        return None
    if s.U >= HOST_BUSY_MAX or host < HOST_CPU or s.itl_ratio <= HOST_ITL_RATIO:
        return None
    ev = [
        *rq_evidence(ri),
        evidence(
            "engine_cpu_share",
            "engine CPU share",
            s.U,
            "fraction of its threads",
            "process.cpu_percent{name=engine}",
        ),
        evidence("host_cpu", "host CPU", host, "%", "host.cpu_percent{cpu=all}"),
        loadgen_evidence(ri),
    ]
    return make_verdict(
        ri,
        "host_starved",
        "Host/CPU-starved",
        f"The engine's threads get only {s.U * 100:.0f}% of their cores while the host is "
        f"{host:.0f}% busy and ITL is {fmt(s.itl_ratio)}x its floor: other processes take "
        "the CPU the engine needs.",
        ev,
        0.7,
        [
            "keep other CPU-heavy work (including the load generator) off the engine's cores, "
            "e.g. taskset / cgroups",
            "lower the engine's -t to the cores it can really have",
            "or move the model to a GPU (-ngl 999)",
        ],
    )


def _host_fix(engine: str) -> str:
    return {
        "vllm": "vLLM: --async-scheduling (or --num-scheduler-steps on older versions), "
        "--disable-log-requests, more --api-server-count",
        "sglang": "SGLang: raise --tokenizer-worker-num, enable overlap scheduling",
        "tgi": "TGI: fewer --max-concurrent-requests per router, more shards",
    }.get(engine, "larger batches so each CPU-side step feeds more GPU work")


def busy_illusion(ri: RuleInput) -> Verdict | None:
    s = ri.s
    if not ri.ctx.has_gpu or s.U is None or s.SM is None:
        return None
    if s.U < ILLUSION_U or s.SM > ILLUSION_SM:
        return None
    ev = [
        evidence("utilisation", "utilisation (U)", s.U, "fraction", "NVML gpu.utilization"),
        evidence("sm_activity", "SM activity", s.SM, "fraction", "NVML GPM gpu.sm_activity"),
        *rq_evidence(ri),
    ]
    return make_verdict(
        ri,
        "busy_illusion",
        '"100% busy" illusion',
        f"NVML says the GPU is {s.U * 100:.0f}% utilised, but only {s.SM * 100:.0f}% of its SMs "
        "are active: utilisation counts time with any kernel running, not how much of the GPU "
        "it used. There is headroom.",
        ev,
        0.8,
        [
            (
                f"raise the batch ({slot_flag(ri.ctx.engine)}) or offered concurrency: the GPU has "
                "idle SMs",
                action("slots", "up"),
            ),
            "alert on SM activity (DCGM/GPM), not on nvidia-smi utilisation",
        ],
    )


#: ITL at more work in flight above this multiple of ITL at the least: not "almost free".
BATCHING_COST = 1.25


def measured_batching(ri: RuleInput) -> str | None:
    """What the run measured when batching cost ITL (docs/design.md section 5: physics
    statements are checked against the run), or None when it did not."""
    curve = ri.curve
    pts = [p for p in (curve.points if curve is not None else []) if p.itl_p50 and p.inflight]
    if len(pts) < 2:
        return None
    lo = min(pts, key=lambda p: p.inflight or 0.0)
    hi = max(
        (p for p in pts if (p.inflight or 0.0) >= 1.5 * (lo.inflight or 0.0)),
        key=lambda p: (p.itl_p50 or 0.0) / (lo.itl_p50 or 1.0),
        default=None,
    )
    if hi is None or lo.itl_p50 is None or hi.itl_p50 is None:
        return None
    if hi.itl_p50 <= BATCHING_COST * lo.itl_p50:
        return None
    assert curve is not None
    knee = (
        f"; the run's measured knee is at {curve.knee:.3g} in flight"
        if curve.knee_reached and curve.knee
        else ""
    )
    return (
        f"Batching is not free here: the run measured ITL p50 {lo.itl_p50 * 1000:.3g} ms at "
        f"{round(lo.inflight or 0.0, 1):.3g} in flight ({lo.level}) and "
        f"{hi.itl_p50 * 1000:.3g} ms at {round(hi.inflight or 0.0, 1):.3g} ({hi.level}), "
        f"{hi.itl_p50 / lo.itl_p50:.2g}x{knee}."
    )


def bandwidth_decode(ri: RuleInput) -> Verdict | None:
    s, w = ri.s, ri.w
    if s.itl_ratio is None or s.itl_floor_bw is None or s.itl_floor_compute is None:
        return None
    if s.itl_floor_bw < s.itl_floor_compute or s.itl_ratio > BW_RATIO:
        return None
    if w.e2e_sent_p50 and w.ttft_sent_p50 is not None and w.ttft_sent_p50 > 0.5 * w.e2e_sent_p50:
        return None  # not decode-dominated
    knee = None
    if ri.ctx.shape is not None and ri.ctx.device is not None and ri.ctx.compute_trusted:
        ctx_t = (w.prompt_mean or 0) + (w.output_mean or 0) / 2
        knee = compute_knee(ri.ctx.shape, ri.ctx.device, context=ctx_t, limit=KNEE_LIMIT)
    ev = [
        evidence("itl_floor_bandwidth", "bandwidth floor", s.itl_floor_bw, "s", s.floor_source),
        evidence("itl_floor_compute", "compute floor", s.itl_floor_compute, "s", s.floor_source),
        evidence("running", "running (R)", s.R, "requests", s.rq_source),
        evidence(
            "compute_knee",
            "compute knee",
            knee,
            "sequences",
            "batch where compute floor = bandwidth floor",
        ),
    ]
    measured = measured_batching(ri)
    if measured is not None:
        batching = measured
    elif knee and knee < KNEE_LIMIT:
        batching = f"Batching raises throughput at almost no ITL cost until about {knee} sequences."
    elif knee is None:
        batching = (
            "Batching raises throughput at little ITL cost until compute saturates; "
            "the device's compute ceiling is unknown until a run measures its knee."
        )
    else:
        batching = (
            "Batching raises throughput at little ITL cost; at this context the KV "
            "reads keep decode memory-bound at any batch size."
        )
    return make_verdict(
        ri,
        "bandwidth_bound_decode",
        "Memory-bandwidth-bound decode",
        f"Decode runs at {fmt(s.itl_ratio)}x the memory-bandwidth floor (ITL "
        f"{fmt((w.itl_p50 or 0) * 1000)} ms "
        f"vs {fmt(s.itl_floor_bw * 1000, 2)} ms): each step streams the weights and KV. {batching}",
        ev,
        0.7,
        [
            (
                f"batch more sequences per step ({slot_flag(ri.ctx.engine)}, more client "
                "concurrency)",
                action("slots", "up"),
            )
            if measured is None
            else (
                "batch up to the measured knee, no further: past it ITL grows faster than "
                "throughput",
                action("slots", "hold"),
            ),
            "quantised weights (fp8 / int4) and an fp8 KV cache cut the bytes per step",
            "speculative decoding trades spare compute for fewer steps",
        ],
    )


def compute_prefill(ri: RuleInput) -> Verdict | None:
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
    ev = [
        evidence("ttft_share_of_e2e", "TTFT share of e2e", share, "fraction", "records"),
        evidence(
            "prompt_tokens_mean", "prompt tokens (mean)", w.prompt_mean, "tokens", "records (usage)"
        ),
        evidence(
            "concurrent_prefills", "concurrent prefills", concurrent, "requests", "R x TTFT share"
        ),
        evidence(
            "ttft_prefill_ratio", "TTFT / (floor x concurrent prefills)", ratio, "x", s.floor_source
        ),
    ]
    eng = ri.ctx.engine
    chunk = {
        "vllm": "--enable-chunked-prefill with a larger --max-num-batched-tokens",
        "sglang": "--chunked-prefill-size",
        "tgi": "--max-batch-prefill-tokens",
        "llamacpp": "--batch-size / --ubatch-size",
        "embedded": "more threads (-t)",
    }.get(eng, "the engine's prefill token budget")
    cache = {"vllm": "--enable-prefix-caching", "llamacpp": "--cache-reuse 256"}.get(
        eng, "prefix caching"
    )
    return make_verdict(
        ri,
        "compute_bound_prefill",
        "Compute-bound prefill",
        f"TTFT is {share:.0%} of each request and sits at {ratio:.1f}x the prefill compute floor "
        f"for {fmt(w.prompt_mean, 0)}-token prompts: prefill is limited by FLOP/s.",
        ev,
        0.7,
        [
            f"reuse shared prefixes ({cache}) so fewer tokens are prefilled",
            f"tune the prefill budget ({chunk}) to overlap prefill with decode",
            "fp8 weights/compute or tensor parallelism for more FLOP/s; shorter prompts",
        ],
    )
