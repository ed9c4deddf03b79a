"""Concrete fixes, named with the detected engine's own settings."""

from __future__ import annotations

from infersight.core.engines import engine_specs
from infersight.core.server_model import action
from infersight.diagnose.rules.base import FixLine

__all__ = ["kv_fixes", "kv_flag", "replica_fixes", "slot_fix", "slot_flag", "under_loaded_fixes"]

#: Engines whose slot setting is not in the telemetry name map (data/telemetry/engines.toml).
_OWN_SLOT_FLAG = {
    "embedded": "infersight serve --parallel",
    "gateway": "the gateway's upstream concurrency limit (`concurrency` in its config)",
}
_ANY = (
    "the server's sequence limit (vLLM --max-num-seqs, llama.cpp --parallel, "
    "SGLang --max-running-requests, TGI --max-batch-size)"
)


def slot_flag(engine: str) -> str:
    """The slot/sequence limit's setting name for ``engine``."""
    if engine in _OWN_SLOT_FLAG:
        return _OWN_SLOT_FLAG[engine]
    spec = engine_specs().get(engine)
    return spec.slot_setting if spec is not None and spec.slot_setting else _ANY


def kv_flag(engine: str) -> str:
    """The settings that size ``engine``'s KV cache (the engine table's)."""
    spec = engine_specs().get(engine)
    if spec is not None and spec.kv_setting:
        return spec.kv_setting
    if engine == "embedded":
        return "infersight serve --ctx"
    return (
        "the server's KV cache size (vLLM VLLM_CPU_KVCACHE_SPACE or "
        "--gpu-memory-utilization, llama.cpp --ctx-size, SGLang --max-total-tokens, "
        "TGI --max-batch-total-tokens)"
    )


def slot_fix(
    engine: str,
    current: int,
    target: int,
    *,
    ctx_per_slot: int | None,
    why: str,
    inferred: str | None = None,
) -> list[FixLine]:
    """How to raise the slot limit from ``current`` to ``target``; ``why`` says why that
    number (the fitted model, memory); ``inferred`` says how ``current`` was found
    when the engine does not state it."""
    flag = slot_flag(engine)
    step = f"{current} \u2192 {target}"
    out: list[FixLine]
    if engine == "embedded":
        ctx = f" --ctx {target * ctx_per_slot}" if ctx_per_slot else ""
        out = [f"raise {flag} {step}{ctx}, {why}"]
    elif engine == "llamacpp":
        ctx = f" and --ctx-size {target * ctx_per_slot}" if ctx_per_slot else ""
        out = [
            f"raise --parallel {step}{ctx} (llama.cpp splits --ctx-size across slots, "
            f"so keep each slot's context), {why}"
        ]
    elif engine == "tgi":
        out = [
            f"raise {flag} {step} with --max-concurrent-requests above it; TGI also caps "
            f"a batch by --max-batch-total-tokens, so let {target} sequences fit, {why}"
        ]
    elif engine == "gateway":
        out = [
            f"raise {flag} {step} if the upstream has free slots, else raise the "
            f"upstream's own limit, {why}"
        ]
    else:
        out = [f"raise {flag} {step}, {why}"]
    out[0] = (str(out[0]), action("slots", from_value=current, to_value=target))
    if engine == "vllm":
        out.append(
            "if vLLM's startup log shows KV blocks for fewer sequences, also raise "
            "--gpu-memory-utilization (e.g. 0.92-0.95)"
        )
    if inferred:
        out.append(
            f"the limit {current} was inferred from {inferred}; if {flag} is set "
            f"otherwise, state it with --engine-slots N"
        )
    return out


def kv_fixes(engine: str) -> list[str]:
    """Ways to make room in the KV cache, with this engine's setting names."""
    if engine == "vllm":
        # vLLM allocates KV blocks as tokens are made: a lower --max-model-len only
        # refuses long requests, it frees no room for the ones that run
        return [
            f"more KV room: {kv_flag(engine)}",
            "lower --max-num-seqs so running sequences stop being preempted",
            "--kv-cache-dtype fp8 (halves KV bytes per token)",
            "more memory: --tensor-parallel-size 2, or more replicas behind a gateway",
        ]
    if engine == "sglang":
        return [
            "cap --context-length",
            "--kv-cache-dtype fp8_e5m2",
            "raise --mem-fraction-static (e.g. 0.9)",
            "lower --max-running-requests",
            "more memory: --tp 2, or more replicas (--dp)",
        ]
    if engine == "tgi":
        return [
            "lower --max-total-tokens / --max-input-tokens",
            "lower --max-batch-total-tokens to what fits without eviction",
            "quantised weights (--quantize fp8) to free memory for KV",
            "more memory: --num-shard 2, or more replicas",
        ]
    if engine in ("llamacpp", "embedded"):
        return [
            "a smaller per-slot context (--ctx-size / --parallel)",
            "a quantised KV cache: --cache-type-k q8_0 --cache-type-v q8_0 (with flash attention)",
            "more memory, or more replicas behind `infersight gateway`",
        ]
    return ["a shorter maximum context", "a quantised (fp8) KV cache", "more memory or replicas"]


def replica_fixes(engine: str) -> list[str]:
    """Adding capacity when the device itself is saturated."""
    base = [
        "add replicas and spread load with `infersight gateway` (one upstream each)",
        "shed or shape load at the gateway: a concurrency limit with a bounded queue "
        "answers 503 + Retry-After instead of growing latency",
    ]
    if engine == "vllm":
        base.insert(1, "scale out with --data-parallel-size, or a faster GPU")
    elif engine == "sglang":
        base.insert(1, "scale out with --dp, or a faster GPU")
    elif engine in ("llamacpp", "embedded"):
        base.insert(1, "use a GPU (-ngl 999) or more CPU threads (-t) if cores are idle")
    return base


def under_loaded_fixes(engine: str, slots: float | None) -> list[FixLine]:
    """What to do when the server waits for work."""
    out: list[FixLine] = [
        (
            "send more concurrent requests (raise client concurrency or batch offline work "
            "with `infersight batch`)",
            action("load", "up"),
        ),
        "put `infersight gateway` with an adaptive concurrency limit in front of it so "
        "many clients share the server",
    ]
    if slots:
        out.append(
            (
                f"or downsize: fewer replicas or a smaller instance; {slot_flag(engine)} "
                f"{int(slots)} is far above the concurrency seen",
                action("replicas", "down"),
            )
        )
    return out
