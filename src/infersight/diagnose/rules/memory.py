"""Memory pressure: the engine answered "out of memory" (docs/design.md section 5).

Any ``OutOfMemory`` record fires it: the engine admitted more sequences, or longer
ones, than its memory holds (device memory or KV cache), and requests failed for it.
The fix is the capacity plan's (``infersight plan``, :func:`plan_capacity`): the slot
limit and context that fit the model on the device, in the engine's own settings,
when the model and device are known; the KV-cache levers otherwise.
"""

from __future__ import annotations

from infersight.core.errors import ConfigError
from infersight.core.verdicts import Evidence, Verdict
from infersight.diagnose.fixes import kv_fixes, slot_flag
from infersight.diagnose.physics.capacity import plan_capacity
from infersight.diagnose.rules.base import RuleInput, evidence, make_verdict, rq_evidence

__all__ = ["memory_pressure"]

_OOM = "OutOfMemory"
#: The capacity plan's settings table names each engine this way.
_PLAN_ENGINE = {
    "vllm": "vllm",
    "sglang": "sglang",
    "tgi": "tgi",
    "llamacpp": "llama.cpp",
    "embedded": "infersight serve",
}


def memory_pressure(ri: RuleInput) -> Verdict | None:
    w, s = ri.w, ri.s
    n = w.errors.get(_OOM, 0)
    if not n:
        return None
    total = w.n_ok + w.n_failed
    ev = [
        evidence("oom_errors", "out-of-memory errors", n, "requests", "records (error kind)"),
        evidence("oom_rate", "out-of-memory rate", n / max(1, total), "fraction", "records"),
    ]
    if _OOM in w.error_example:
        ev.append(
            evidence(
                f"example.{_OOM}",
                f"example {_OOM}",
                w.error_example[_OOM],
                "",
                "records (error_message)",
            )
        )
    ev += rq_evidence(ri)
    fixes = _plan_fixes(ri, ev)
    fixes += kv_fixes(ri.ctx.engine)
    fixes.append(
        "cap each request's max_tokens (`max_tokens_cap` on the gateway's upstream) "
        "so one long answer cannot claim the KV cache"
    )
    running = f" with {s.R:.1f} running" if s.R is not None else ""
    return make_verdict(
        ri,
        "memory_pressure",
        "Memory pressure (out of memory)",
        f"{n} of {total} requests failed because the engine ran out of memory{running}: it "
        "admits more or longer sequences than its memory holds.",
        ev,
        0.9,
        fixes,
    )


def _plan_fixes(ri: RuleInput, ev: list[Evidence]) -> list[str]:
    """The capacity plan's settings for this engine, model and device (if known)."""
    ctx, w, s = ri.ctx, ri.w, ri.s
    flag = slot_flag(ctx.engine)
    if ctx.shape is None or ctx.device is None:
        return [
            f"size {flag} and the context to the memory: pass --model and --gpu (or run "
            "`infersight plan`) for the numbers"
        ]
    seq_ctx = ctx.ctx_per_slot or int((w.prompt_mean or 512) + (w.output_mean or 256))
    try:
        plan = plan_capacity(ctx.shape, ctx.device, ctx=seq_ctx)
    except ConfigError:
        return []
    ev.append(
        evidence(
            "recommended_slots",
            "recommended slots",
            plan.recommended_slots,
            "sequences",
            f"capacity plan at {seq_ctx} tokens per sequence",
        )
    )
    if not plan.fits:
        return [note for note in plan.notes if note.startswith("does not fit")]
    settings = plan.settings.get(_PLAN_ENGINE.get(ctx.engine, ""), [])
    current = f"{s.S:.0f} \u2192 " if s.S is not None else ""
    fit = (
        f"{flag} {current}{plan.recommended_slots}: {plan.max_sequences} such sequences "
        "fit next to the weights, and no longer ones are admitted"
    )
    if settings:
        return [
            f"apply the capacity plan for {seq_ctx}-token sequences on {plan.device}: "
            f"{' '.join(settings)} ({fit})"
        ]
    return [f"size for {seq_ctx}-token sequences on {plan.device}: {fit}"]
