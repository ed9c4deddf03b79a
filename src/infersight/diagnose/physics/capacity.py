"""Capacity planner: memory breakdown, concurrent sequences and engine settings.

From a model shape, a device (or N of them, tensor parallel) and a context length:
weights + activations + KV budget + headroom = device memory · utilisation target;
max sequences = KV budget / KV bytes of one sequence at that context.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infersight.core.errors import ConfigError, file_error
from infersight.core.model_file import default_model_path
from infersight.diagnose.physics.floors import decode_floor, prefill_floor
from infersight.diagnose.physics.hardware import GIB, Device
from infersight.diagnose.physics.loaders import shape_from_gguf, shape_from_hf_config
from infersight.diagnose.physics.shape import ModelShape
from infersight.diagnose.physics.slots import (
    GPU_UTILISATION,
    KNEE_NEVER,
    SlotAdvice,
    recommend_slots,
)

__all__ = ["KNEE_NEVER", "CapacityPlan", "load_shape", "plan_capacity"]

#: Output tokens per request of the estimate when ``--tokens`` is not given.
DEFAULT_OUTPUT_TOKENS = 256
#: llama.cpp's limit on sequences decoded together (its LLAMA_MAX_SEQ).
LLAMA_MAX_SEQ = 256


def load_shape(spec: str | Path) -> ModelShape:
    """A model shape from ``embedded``, a ``.gguf`` file, a ``config.json`` or a folder.

    Raises :class:`ConfigError` when the file is missing or cannot be understood.
    """
    s = str(spec)
    if s == "embedded":
        return shape_from_gguf(default_model_path())
    p = Path(s)
    if p.is_dir():
        ggufs = sorted(p.glob("*.gguf"))
        p = ggufs[0] if ggufs else p / "config.json"
    try:
        with p.open("rb") as f:
            magic = f.read(4)
    except OSError as e:
        raise file_error(p, e) from None
    if magic == b"GGUF":
        return shape_from_gguf(p)
    return shape_from_hf_config(p)


@dataclass(slots=True)
class CapacityPlan:
    """The planner's answer (all sizes per device unless named total)."""

    model: str
    device: str
    devices: int
    ctx: int
    weights_bytes: float
    kv_bytes_per_token: float
    kv_bytes_per_sequence: float
    activations_bytes: float
    headroom_bytes: float
    kv_budget_bytes: float
    memory_bytes: float
    max_sequences: int
    fits: bool
    kv_dtype: str
    compute_knee: int
    #: The slot / sequence limit the settings use (shared with `diagnose`).
    recommended_slots: int = 0
    settings: dict[str, list[str]] = field(default_factory=dict)
    estimate: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__slots__}


def _kv_elem(kv_dtype: str, cpu: bool) -> tuple[float, str]:
    d = kv_dtype.lower()
    if d in ("auto", "bf16", "fp16", "f16", "bfloat16", "float16"):
        return 2.0, "f16" if cpu else "auto"
    if d in ("fp8", "fp8_e4m3", "fp8_e5m2", "int8"):
        return 1.0, "fp8"
    if d == "q8_0":
        return 34 / 32, "q8_0"
    if d in ("q4_0", "int4"):
        return 18 / 32, "q4_0"
    raise ConfigError(f"unknown --kv-dtype {kv_dtype!r}; use auto, fp8, q8_0 or q4_0")


def plan_capacity(
    shape: ModelShape,
    device: Device,
    *,
    ctx: int,
    kv_dtype: str = "auto",
    concurrency: int | None = None,
    tokens: int | None = None,
    weight_bytes_per_param: float | None = None,
    prompt_tokens: int | None = None,
    threads: int | None = None,
) -> CapacityPlan:
    """Plan memory and settings for serving ``shape`` on ``device`` at context ``ctx``.

    The slot / sequence limit comes from :func:`recommend_slots`; ``diagnose`` caps a
    run's own number (the fitted model, docs/design.md section 9) with the same memory
    bound, and every engine's
    settings use that one number. ``threads``: llama.cpp's ``-t`` on a CPU (its
    physical cores). ``prompt_tokens``: the estimate's prompt length (without it,
    prompts that fill the context, and the plan says so).
    """
    if ctx <= 0:
        raise ConfigError("--ctx must be positive")
    cpu = device.kind == "cpu"
    n_dev = device.count
    kv_b, kv_name = _kv_elem(kv_dtype, cpu)
    adv = recommend_slots(
        shape,
        device,
        ctx=ctx,
        kv_bytes_per_element=kv_b,
        weight_bytes_per_param=weight_bytes_per_param,
    )
    b = adv.budget
    fits = b.kv_budget > 0 and b.max_seqs >= 1
    notes: list[str] = list(shape.notes)
    if ctx > (shape.max_context or ctx):
        notes.append(f"--ctx {ctx} exceeds the model's trained context {shape.max_context}")
    if not fits:
        need = shape.weights_bytes(weight_bytes_per_param) + shape.kv_bytes_for_context(ctx, kv_b)
        n_needed = max(n_dev + 1, math.ceil(need / b.usable))
        notes.append(
            f"does not fit: weights {b.weights / GIB:.1f} GiB + one sequence's KV "
            f"{b.per_seq / GIB:.2f} GiB exceed {b.usable / GIB:.1f} GiB usable per device; "
            f"use --gpus {n_needed}, quantised weights or a smaller --ctx"
        )
    else:
        notes.append(f"slots: {adv.target}, {adv.why()}")
        if concurrency and concurrency > adv.target:
            notes.append(
                f"--concurrency {concurrency} exceeds the {adv.target} slots one "
                f"server runs well: the rest queue, or add replicas"
            )
    plan = CapacityPlan(
        model=shape.name,
        device=device.name,
        devices=n_dev,
        ctx=ctx,
        weights_bytes=b.weights,
        kv_bytes_per_token=shape.kv_bytes_per_token(kv_b) / n_dev,
        kv_bytes_per_sequence=b.per_seq,
        activations_bytes=b.activations,
        headroom_bytes=b.headroom,
        kv_budget_bytes=max(0.0, b.kv_budget),
        memory_bytes=device.memory_bytes,
        max_sequences=b.max_seqs,
        fits=fits,
        kv_dtype=kv_name,
        compute_knee=adv.knee,
        recommended_slots=adv.target,
        settings=_settings(device, ctx=ctx, advice=adv, kv_name=kv_name, threads=threads),
        notes=notes,
    )
    if fits and not cpu and adv.target > LLAMA_MAX_SEQ:
        notes.append(
            f"llama.cpp runs at most {LLAMA_MAX_SEQ} sequences at once: its line "
            f"says --parallel {LLAMA_MAX_SEQ}, the others {adv.target}"
        )
    if concurrency or tokens or prompt_tokens:
        out = tokens or DEFAULT_OUTPUT_TOKENS
        if prompt_tokens is not None and prompt_tokens + out > ctx:
            raise ConfigError(
                f"--prompt-tokens {prompt_tokens} + {out} output tokens exceed --ctx {ctx}"
            )
        plan.estimate = _estimate(
            shape, device, plan, concurrency or 1, out, kv_b, weight_bytes_per_param, prompt_tokens
        )
    return plan


def _settings(
    device: Device, *, ctx: int, advice: SlotAdvice, kv_name: str, threads: int | None = None
) -> dict[str, list[str]]:
    n = device.count
    seqs = advice.target  # one number for every engine: the sequences run at once
    if device.kind == "cpu":
        cache = (
            [] if kv_name == "f16" else [f"--cache-type-k {kv_name}", f"--cache-type-v {kv_name}"]
        )
        t = threads or device.cores or 1
        return {
            "llama.cpp": [f"--parallel {seqs}", f"--ctx-size {ctx * seqs}", f"-t {t}", *cache],
            "infersight serve": [f"--parallel {seqs}", f"--ctx {ctx * seqs}"],
        }
    util = GPU_UTILISATION
    vllm = [
        f"--max-model-len {ctx}",
        f"--gpu-memory-utilization {util:.2f}",
        f"--max-num-seqs {seqs}",
    ]
    sglang = [
        f"--context-length {ctx}",
        f"--mem-fraction-static {util - 0.02:.2f}",
        f"--max-running-requests {seqs}",
    ]
    tgi = [
        f"--max-total-tokens {ctx}",
        f"--max-input-tokens {max(1, ctx - 1)}",
        f"--max-batch-total-tokens {seqs * ctx}",
        f"--max-concurrent-requests {seqs}",
    ]
    lcpp = [
        f"--parallel {min(seqs, LLAMA_MAX_SEQ)}",
        f"--ctx-size {ctx * min(seqs, LLAMA_MAX_SEQ)}",
        "-ngl 999",
    ]
    if n > 1:
        vllm.append(f"--tensor-parallel-size {n}")
        sglang.append(f"--tp {n}")
        tgi.append(f"--num-shard {n}")
        lcpp.append("--split-mode layer")
    if kv_name == "fp8":
        vllm.append("--kv-cache-dtype fp8")
        sglang.append("--kv-cache-dtype fp8_e5m2")
        lcpp += ["--cache-type-k q8_0", "--cache-type-v q8_0", "--flash-attn on"]
    elif kv_name in ("q8_0", "q4_0"):
        lcpp += [f"--cache-type-k {kv_name}", f"--cache-type-v {kv_name}", "--flash-attn on"]
    return {"vllm": vllm, "sglang": sglang, "tgi": tgi, "llama.cpp": lcpp}


def _estimate(
    shape: ModelShape,
    device: Device,
    plan: CapacityPlan,
    concurrency: int,
    tokens: int,
    kv_b: float,
    wbpp: float | None,
    prompt_tokens: int | None,
) -> dict[str, Any]:
    batch = max(1, min(concurrency, plan.max_sequences or 1))
    # Without a prompt length, the worst case the context allows: prompts that fill it.
    prompt = prompt_tokens if prompt_tokens is not None else max(1, plan.ctx - tokens)
    ctx_avg = prompt + tokens / 2
    d = decode_floor(
        shape,
        device,
        batch=batch,
        context=ctx_avg,
        kv_bytes_per_element=kv_b,
        weight_bytes_per_param=wbpp,
    )
    p = prefill_floor(shape, device, tokens=prompt, weight_bytes_per_param=wbpp)
    e2e = p.ttft_s + tokens * d.itl_s
    return {
        "batch": batch,
        "queued": max(0, concurrency - batch),
        "prompt_tokens": prompt,
        #: True when no --prompt-tokens was given: prompts assumed to fill the context.
        "prompt_tokens_assumed": prompt_tokens is None,
        "output_tokens": tokens,
        "itl_floor_s": d.itl_s,
        "itl_bound": d.bound,
        "ttft_floor_s": p.ttft_s,
        "output_tokens_per_s": d.tokens_per_s,
        "requests_per_s": batch / e2e if e2e else 0.0,
        "e2e_floor_s": e2e,
    }
