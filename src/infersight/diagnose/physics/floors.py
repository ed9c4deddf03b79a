"""Roofline floors for decode and prefill (docs/design.md section 6).

- Decode ITL floor ≈ max(bandwidth floor, compute floor):
  bandwidth floor = (weight bytes read per step + Σ context_tokens · kv_bytes_per_token)
  / memory bandwidth; compute floor = 2 · active_params · batch / peak FLOP/s
  (plus the attention's 4 · layers · heads · head_dim FLOPs per context token).
- Prefill (TTFT) floor ≈ max(compute, bandwidth): compute = (2 · active_params · prompt
  + 2 · layers · heads · head_dim · prompt²) / peak FLOP/s (the causal attention term);
  bandwidth = weight bytes / memory bandwidth (the weights are read at least once).

Floors are what the hardware cannot beat; a real engine sits above them. An observed
ITL within about 1.5-2x of the bandwidth floor means decode is memory-bandwidth-bound.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from infersight.diagnose.physics.hardware import Device
from infersight.diagnose.physics.shape import ModelShape

__all__ = ["DecodeFloor", "PrefillFloor", "compute_knee", "decode_floor", "prefill_floor"]


@dataclass(frozen=True, slots=True)
class DecodeFloor:
    """Lower bounds for one decode step of ``batch`` sequences."""

    batch: int
    bandwidth_s: float
    compute_s: float
    bytes_per_step: float
    flops_per_step: float

    @property
    def itl_s(self) -> float:
        """The ITL floor: the larger of the two."""
        return max(self.bandwidth_s, self.compute_s)

    @property
    def bound(self) -> str:
        return "memory bandwidth" if self.bandwidth_s >= self.compute_s else "compute"

    @property
    def tokens_per_s(self) -> float:
        """Upper bound on the output token throughput of the whole batch."""
        return self.batch / self.itl_s if self.itl_s > 0 else 0.0


@dataclass(frozen=True, slots=True)
class PrefillFloor:
    """Lower bounds for a prefill of ``tokens`` prompt tokens."""

    tokens: int
    compute_s: float
    bandwidth_s: float
    flops: float

    @property
    def ttft_s(self) -> float:
        return max(self.compute_s, self.bandwidth_s)

    @property
    def bound(self) -> str:
        return "compute" if self.compute_s >= self.bandwidth_s else "memory bandwidth"


def decode_floor(
    shape: ModelShape,
    device: Device,
    *,
    batch: int = 1,
    context: float = 0.0,
    weight_bytes_per_param: float | None = None,
    kv_bytes_per_element: float | None = None,
    dtype: str = "bf16",
) -> DecodeFloor:
    """Decode-step floors for ``batch`` sequences of average ``context`` tokens each."""
    batch = max(1, int(batch))
    kv = shape.kv_bytes_for_context(int(context), kv_bytes_per_element) if context else 0.0
    weight_bytes = shape.decode_weight_bytes(batch, weight_bytes_per_param)
    step_bytes = weight_bytes + batch * kv
    attn_flops = 4.0 * shape.n_layers * shape.n_heads * shape.head_dim * context
    flops = batch * (2.0 * shape.n_active_params + attn_flops)
    bw = device.total_bandwidth
    peak = device.peak_flops(dtype)
    return DecodeFloor(
        batch=batch,
        bandwidth_s=step_bytes / bw if bw else 0.0,
        compute_s=flops / peak if peak else 0.0,
        bytes_per_step=step_bytes,
        flops_per_step=flops,
    )


def prefill_floor(
    shape: ModelShape,
    device: Device,
    *,
    tokens: int,
    weight_bytes_per_param: float | None = None,
    dtype: str = "bf16",
) -> PrefillFloor:
    """Prefill floors for one prompt of ``tokens`` tokens."""
    n = max(1, int(tokens))
    flops = (
        2.0 * shape.n_active_params * n
        + 2.0 * shape.n_layers * shape.n_heads * shape.head_dim * n * n
    )
    peak = device.peak_flops(dtype)
    bw = device.total_bandwidth
    return PrefillFloor(
        tokens=n,
        compute_s=flops / peak if peak else 0.0,
        bandwidth_s=shape.weights_bytes(weight_bytes_per_param) / bw if bw else 0.0,
        flops=flops,
    )


def compute_knee(
    shape: ModelShape,
    device: Device,
    *,
    context: float = 0.0,
    weight_bytes_per_param: float | None = None,
    kv_bytes_per_element: float | None = None,
    dtype: str = "bf16",
    limit: int = 1 << 14,
) -> int:
    """The smallest batch at which decode turns compute-bound (throughput stops growing
    almost for free). Returns ``limit`` if it never does below it."""
    lo, hi = 1, limit

    def compute_bound(b: int) -> bool:
        f = decode_floor(
            shape,
            device,
            batch=b,
            context=context,
            weight_bytes_per_param=weight_bytes_per_param,
            kv_bytes_per_element=kv_bytes_per_element,
            dtype=dtype,
        )
        return f.compute_s >= f.bandwidth_s

    if not compute_bound(hi):
        return limit
    # the first batch in [lo, hi] that is compute-bound (the test is monotone in it)
    return lo + bisect.bisect_left(range(lo, hi), True, key=compute_bound)
