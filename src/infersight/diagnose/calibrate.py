"""The physics a run's fixes may lean on (docs/design.md sections 5 and 6).

- On a CPU the compute ceiling comes from the run itself: the model FLOP/s at the
  measured knee (output and prompt tokens/s there, 2 x active parameters each), not a
  float32 matmul, which puts llama.cpp's knee far too high. Without a measured knee a
  CPU has no trusted compute ceiling: no MFU, no roofline knee.
- The bounds on a slot limit: what memory holds (always, when the model and device are
  known) and the roofline's compute knee (only with a trusted compute ceiling).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from infersight.core.curve import CapacityCurve
from infersight.diagnose.context import RunContext
from infersight.diagnose.model_numbers import PhysicsBounds
from infersight.diagnose.physics.slots import KNEE_NEVER, recommend_slots

__all__ = ["calibrate_cpu", "physics_bounds", "sequence_context"]


def _per_request(agg: Mapping[str, Any], key: str) -> float | None:
    tokens, req = agg.get("tokens") or {}, agg.get("requests") or {}
    n = req.get("in_window_ok") or req.get("in_window") or req.get("ok")
    v = tokens.get(key) if isinstance(tokens, dict) else None
    return float(v) / float(n) if isinstance(v, int | float) and n else None


def calibrate_cpu(
    ctx: RunContext, curve: CapacityCurve | None, aggregates: Mapping[str, Any]
) -> None:
    """Replace an untrusted CPU FLOP/s figure with the one the run measured at its knee."""
    dev, shape = ctx.device, ctx.shape
    if dev is None or shape is None or dev.kind != "cpu" or ctx.compute_trusted:
        return
    if curve is None or not curve.knee_reached or curve.knee_level is None:
        ctx.notes.append(
            "CPU compute ceiling unknown: the run measured no knee to calibrate "
            "it from (a generic matmul figure is not used), so no MFU is shown"
        )
        return
    pt = next(p for p in curve.points if p.level == curve.knee_level)
    agg = aggregates.get(curve.knee_level) or {}
    prompt = _per_request(agg, "prompt") or 0.0
    toks = (pt.token_throughput or 0.0) + (pt.throughput or 0.0) * prompt
    if toks <= 0:
        return
    flops = 2.0 * shape.n_active_params * toks
    src = (
        f"calibrated from the run: {toks:.4g} tokens/s ({pt.token_throughput or 0:.4g} "
        f"output + {(pt.throughput or 0) * prompt:.4g} prompt) at its measured knee "
        f"({pt.level}, {curve.knee:.3g} in flight) x 2 x {shape.n_active_params / 1e6:.0f}M "
        "active parameters"
    )
    ctx.device = dev.calibrated_to(flops, src)
    ctx.device_origin = "calibrated"
    ctx.notes.append(
        f"CPU compute ceiling {flops / 1e9:.3g} GFLOP/s, {src} (the float32 "
        f"matmul figure, {dev.peak_flops('bf16') / 1e9:.3g} GFLOP/s, is not used)"
    )


def sequence_context(ctx: RunContext, aggregates: Mapping[str, Any]) -> int:
    """Tokens of context one sequence needs: the engine's per-slot context, else the
    run's mean prompt + output."""
    if ctx.ctx_per_slot:
        return ctx.ctx_per_slot
    means = [
        (_per_request(a, "prompt") or 0.0) + (_per_request(a, "output") or 0.0)
        for a in aggregates.values()
        if isinstance(a, dict)
    ]
    return int(max(means, default=0.0)) or 768


def physics_bounds(ctx: RunContext, seq_ctx: int) -> PhysicsBounds:
    """Memory's bound on the slot limit, and the roofline's knee where compute is trusted."""
    if ctx.shape is None or ctx.device is None:
        return PhysicsBounds()
    adv = recommend_slots(ctx.shape, ctx.device, ctx=seq_ctx)
    fits = dataclasses.replace(adv, target=max(1, adv.mem_max), limited_by="memory")
    knee = adv.knee if ctx.compute_trusted and adv.knee < KNEE_NEVER else None
    return PhysicsBounds(memory=max(1, adv.mem_max), memory_why=fits.why(), compute_knee=knee)
