"""How many concurrent sequences to allow from the physics alone (docs/design.md section
6): `plan`'s recommendation, and the bounds `diagnose` puts on a run's own number
(memory always; the compute knee only when the run reached no knee of its own and the
device's compute ceiling is trusted).

- Memory: device memory x the engine's utilisation target, less the weights and the
  activations of one step, divided by one sequence's KV cache at ``ctx`` tokens.
- GPU: allow what memory holds (capped at 1024). Sequences beyond the demand cost a
  GPU engine nothing until they are used, and an overloaded server's demand has no
  useful upper bound, so the number depends on the model and the device only.
- CPU: throughput stops growing once decode turns compute-bound (the knee), and every
  llama.cpp slot claims its share of ``--ctx-size``; allow twice the knee.

The demand a run showed does not change the number; `diagnose` sizes its fix from the
run (docs/design.md section 5, "The number in a fix") and uses this only as a bound.
"""

from __future__ import annotations

from dataclasses import dataclass

from infersight.diagnose.physics.floors import compute_knee
from infersight.diagnose.physics.hardware import GIB, Device
from infersight.diagnose.physics.shape import ModelShape

__all__ = ["KNEE_NEVER", "SlotAdvice", "memory_budget", "recommend_slots"]

#: Fraction of device memory engines claim by default (vLLM --gpu-memory-utilization).
GPU_UTILISATION = 0.90
#: Of host memory, leave the OS and other processes 20%.
CPU_UTILISATION = 0.80
#: CUDA context, cuBLAS workspaces and CUDA graphs: not visible to the model (estimate).
GPU_RUNTIME_OVERHEAD = 1.5 * GIB
#: compute_knee() answer meaning "never compute-bound below this batch".
KNEE_NEVER = 1 << 14
#: Tokens one prefill step processes (vLLM's default max_num_batched_tokens with chunked prefill).
BATCHED_TOKENS = 8192
#: The most sequences recommended for a GPU engine / a CPU engine.
GPU_MAX_SEQS, CPU_MAX_SEQS = 1024, 256


@dataclass(frozen=True, slots=True)
class MemoryBudget:
    """Per-device memory for serving ``shape`` at ``ctx`` tokens per sequence."""

    usable: float
    headroom: float
    weights: float
    activations: float
    per_seq: float
    kv_budget: float
    max_seqs: int


def _activations(shape: ModelShape, seqs: int, cpu: bool) -> float:
    # Peak transient memory of one forward step: the MLP's gate/up outputs and a few
    # hidden-size buffers for every batched token, plus fp32 logits of every sequence.
    tokens = 512 if cpu else BATCHED_TOKENS
    per_token = (2 * shape.intermediate_size + 4 * shape.hidden_size) * (4 if cpu else 2)
    return (
        tokens * per_token
        + max(1, seqs) * shape.vocab_size * 4
        + (0 if cpu else GPU_RUNTIME_OVERHEAD)
    )


def memory_budget(
    shape: ModelShape,
    device: Device,
    *,
    ctx: int,
    kv_bytes_per_element: float,
    weight_bytes_per_param: float | None = None,
) -> MemoryBudget:
    """Weights, activations and the KV budget per device; how many sequences fit."""
    cpu = device.kind == "cpu"
    n_dev = device.count
    weights = shape.weights_bytes(weight_bytes_per_param) / n_dev
    per_seq = shape.kv_bytes_for_context(ctx, kv_bytes_per_element) / n_dev
    usable = device.memory_bytes * (CPU_UTILISATION if cpu else GPU_UTILISATION)
    act0 = _activations(shape, 1, cpu) / n_dev
    guess = max(0, int((usable - weights - act0) // per_seq)) if per_seq else 0
    act = _activations(shape, min(guess, 256) or 1, cpu) / n_dev
    kv_budget = usable - weights - act
    max_seqs = max(0, int(kv_budget // per_seq)) if per_seq > 0 else 0
    return MemoryBudget(
        usable=usable,
        headroom=device.memory_bytes - usable,
        weights=weights,
        activations=act,
        per_seq=per_seq,
        kv_budget=kv_budget,
        max_seqs=max_seqs,
    )


@dataclass(frozen=True, slots=True)
class SlotAdvice:
    """The recommended slot / sequence limit and why."""

    target: int
    #: Sequences whose KV cache fits next to the weights.
    mem_max: int
    #: The batch at which decode turns compute-bound (KNEE_NEVER: never).
    knee: int
    ctx: int
    budget: MemoryBudget
    #: What limits ``target``: "memory", "compute knee" or "cap" (the most recommended).
    limited_by: str

    def why(self) -> str:
        """One clause for a verdict or a plan: what bounds the number."""
        kv = self.target * self.budget.per_seq / GIB
        free = max(0.0, self.budget.kv_budget) / GIB
        fits = (
            f"{self.target} x {self.ctx}-token sequences = {kv:.2f} GiB of KV, {free:.1f} GiB free"
        )
        if self.limited_by == "memory":
            return f"all the memory holds ({fits})"
        if self.limited_by == "compute knee":
            return (
                f"twice the {self.knee} sequences where decode turns compute-bound on this "
                f"device; slots beyond that add latency, not throughput ({fits})"
            )
        return f"which fits in memory ({fits})"


def recommend_slots(
    shape: ModelShape,
    device: Device,
    *,
    ctx: int,
    kv_bytes_per_element: float | None = None,
    weight_bytes_per_param: float | None = None,
) -> SlotAdvice:
    """The slot / sequence limit for ``shape`` on ``device`` at ``ctx`` tokens per sequence."""
    kv_b = kv_bytes_per_element if kv_bytes_per_element is not None else shape.kv_bytes_per_element
    b = memory_budget(
        shape,
        device,
        ctx=ctx,
        kv_bytes_per_element=kv_b,
        weight_bytes_per_param=weight_bytes_per_param,
    )
    knee = compute_knee(
        shape,
        device,
        context=ctx / 2,
        kv_bytes_per_element=kv_b,
        weight_bytes_per_param=weight_bytes_per_param,
        limit=KNEE_NEVER,
    )
    mem_max = max(1, b.max_seqs)
    limits = [(mem_max, "memory")]
    if device.kind == "cpu":
        limits.append((CPU_MAX_SEQS, "cap"))
        if knee < KNEE_NEVER:
            limits.append((max(4, 2 * knee), "compute knee"))
    else:
        limits.append((GPU_MAX_SEQS, "cap"))
    target, bound = min(limits, key=lambda x: x[0])
    return SlotAdvice(
        target=target, mem_max=b.max_seqs, knee=knee, ctx=ctx, budget=b, limited_by=bound
    )
