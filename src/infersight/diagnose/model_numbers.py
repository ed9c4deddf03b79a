"""The number in a fix, from the fitted model (docs/design.md section 9).

The model's fix (``servermodel.advise``) names one knob and the smallest setting it
predicts meets the goal. The rules and the run's recommendation word their fixes
from the :class:`FixNumbers` built here; none of them computes a number of its own.
Memory (section 6) stays the last cap on slots. A setting beyond the measured range
that the model's self-check does not support gets no number: ``slots`` (or
``replicas``) is None and ``no_number`` says why.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from infersight.core.server_model import Fix, SelfCheck, ServerModel
from infersight.servermodel.advise import HELD
from infersight.servermodel.binding import PREFILL_BOUND
from infersight.servermodel.bounds import saturated_text

__all__ = ["FixNumbers", "PhysicsBounds", "model_numbers"]


@dataclass(frozen=True, slots=True)
class PhysicsBounds:
    """What section 6 says about this model on this device (None: unknown)."""

    memory: int | None = None
    memory_why: str = ""
    #: Roofline batch where decode turns compute-bound (None: unknown or untrusted).
    compute_knee: int | None = None


@dataclass(slots=True)
class FixNumbers:
    """The numbers of the run's fixes, from the model, and what they rest on."""

    #: The slot limit to set (None: no number the run supports; see ``no_number``).
    slots: int | None
    #: The slot limit now (stated, exported or fitted; None: not reached).
    current: int | None
    replicas: int | None
    #: Requests per second one replica serves at ``slots``, and the rate to serve.
    per_replica: float
    target_rate: float
    #: Requests running at the fix (the model's), for the evidence.
    needed: float
    #: "model", "memory" (capped by memory) or "none".
    bound: str = "model"
    basis: str = "model"
    predicted: dict[str, float | None] = field(default_factory=dict)
    rests_on: list[str] = field(default_factory=list)
    no_number: str = ""
    closed_loop: bool = False
    #: The limit is prefill's: prompts prefilled together wait for each other.
    prefill: bool = False

    def why(self) -> str:
        """Everything the numbers rest on, for the evidence."""
        return "; ".join(self.rests_on)

    def short(self) -> str:
        """One clause for a fix line."""
        head = self.rests_on[0] if self.rests_on else "the fitted model"
        return head + (", capped by memory" if self.bound == "memory" else "")


def _int(v: float | None) -> int | None:
    return None if v is None or not math.isfinite(v) else max(1, round(v))


def model_numbers(
    m: ServerModel,
    check: SelfCheck,
    fix: Fix | None,
    *,
    closed_loop: bool,
    physics: PhysicsBounds | None = None,
) -> FixNumbers | None:
    """The numbers for the rules from the model's fix (None: the model made none)."""
    if fix is None:
        return None
    physics = physics or PhysicsBounds()
    current = _int(m.slots.value)
    p = fix.predicted
    rests = [
        f"the fitted model ({check.method}, held-out error {fix.error:.0%})"
        if fix.error is not None
        else f"the fitted model (not checked: every level ran {HELD.get(fix.knob or '', 'so')})"
    ]
    slots: int | None = current
    replicas: int | None = 1
    no_number = ""
    trusted = check.trusted
    measured_n = m.measured.get("n", 0.0)
    if fix.knob == "slots":
        slots = _int(fix.to_value)
        if not trusted and slots is not None and slots > measured_n:
            no_number, slots = check.why_not, None
    elif fix.knob == "replicas":
        replicas = _int(fix.to_value)
        if not trusted:
            no_number, replicas = check.why_not, None
    bound = "model"
    if physics.memory is not None and slots is not None and slots > physics.memory:
        slots, bound = max(1, physics.memory), "memory"
        rests.append(
            f"capped: memory holds {physics.memory}"
            + (f" ({physics.memory_why})" if physics.memory_why else "")
        )
    elif physics.memory is None:
        rests.append("memory not checked (the model or device is unknown)")
    if no_number:
        rests.append(f"no number beyond the measured range: {no_number}")
    elif fix.if_saturated is not None:
        rests.append(
            f"{p.running or 0.0:.1f} running where the run had at most {measured_n:.0f}: "
            f"if compute saturates at {measured_n:.0f}, {saturated_text(fix.if_saturated)}"
        )
    thr = p.throughput or 0.0
    return FixNumbers(
        slots=slots,
        current=current,
        replicas=replicas,
        per_replica=thr / (replicas or 1),
        target_rate=thr,
        needed=p.running or 0.0,
        bound=bound,
        basis=fix.basis,
        rests_on=rests,
        no_number=no_number,
        predicted={}
        if no_number
        else {
            "throughput": p.throughput,
            "ttft_p50": p.ttft_p50,
            "ttft_p99": p.ttft_p99,
            "tpot_p50": p.tpot_p50,
        },
        closed_loop=closed_loop,
        prefill=PREFILL_BOUND in fix.rests_on,
    )
