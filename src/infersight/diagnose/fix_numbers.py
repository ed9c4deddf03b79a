"""The number in a fix, from the run (docs/design.md section 5, "The number in a fix").

1. Little's law: the requests needed in flight, N* = target rate x time in the engine.
   Open loop: the highest rate offered (never the queue an overloaded open loop
   built). Closed loop: each of the top level's C clients keeps one request in flight,
   so N* = C, and the rate they would send unqueued is C / time in the engine at the
   best operating point. The slots asked for are ceil(1.2 N*), never more than C in a
   closed loop (no client would use them).
2. The measured knee caps it at 2 x the knee; the rest becomes replicas:
   ceil(target rate / the measured capacity of one replica).
3. Memory (section 6) is the last cap. The roofline's compute knee caps the number
   only when the run reached no knee, and then the number is an "estimate".

Every set of numbers carries its predicted effect (throughput and TTFT p99 after the
change) and what the prediction rests on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from infersight.core.curve import CapacityCurve, CurvePoint
from infersight.core.operating_point import WITHIN

__all__ = ["HEADROOM", "FixNumbers", "PhysicsBounds", "fix_numbers"]

#: Slots asked for per request needed in flight (Little's law gives a mean).
HEADROOM = 1.2
#: Queue below which a level ran unqueued (its TTFT is the server's own).
NO_QUEUE = 0.5


@dataclass(frozen=True, slots=True)
class PhysicsBounds:
    """What section 6 says about this model on this device (None: unknown)."""

    memory: int | None = None
    memory_why: str = ""
    #: Roofline batch where decode turns compute-bound (None: unknown or untrusted).
    compute_knee: int | None = None


@dataclass(slots=True)
class FixNumbers:
    """The numbers of the run's fixes, and the prediction behind them."""

    #: Requests needed in flight (Little's law), and the rate and time behind it.
    needed: float
    target_rate: float
    time_in_engine: float
    #: The slot limit to set, and what bounded it: "Little's law", "clients",
    #: "knee", "memory" or "roofline".
    slots: int
    bound: str
    replicas: int
    #: Requests per second one replica serves at ``slots`` (the measured capacity past
    #: a knee, else slots / time in the engine).
    per_replica: float = 0.0
    basis: str = "measured"
    predicted: dict[str, float | None] = field(default_factory=dict)
    rests_on: list[str] = field(default_factory=list)
    closed_loop: bool = False

    def why(self) -> str:
        """Everything the numbers rest on, for the evidence."""
        return "; ".join(self.rests_on)

    def short(self) -> str:
        """One clause for a fix line: the law and what bounded it."""
        head = self.rests_on[0] if self.rests_on else "Little's law"
        bound = {"knee": "capped at 2 x the measured knee", "memory": "capped by memory",
                 "roofline": "capped by the roofline's compute knee: an estimate"}.get(self.bound)
        return head + (f", {bound}" if bound else "")


def _point(curve: CapacityCurve, level: str | None) -> CurvePoint | None:
    return next((p for p in curve.points if p.level == level), None)


def _service(curve: CapacityCurve, at: CurvePoint | None) -> float | None:
    """Time in the engine at ``at``, else the least of the levels'."""
    if at is not None and at.time_in_engine:
        return at.time_in_engine
    times = [p.time_in_engine for p in curve.points if p.time_in_engine]
    return min(times) if times else None


def _unqueued_ttft(curve: CapacityCurve, slots: int) -> CurvePoint | None:
    """The most loaded level that ran without a queue and within ``slots``."""
    cands = [p for p in curve.points if p.ttft_p99 is not None and (p.inflight or 0) <= slots
             and p.sustainable is not False
             and ((p.queue is None and curve.plateau_at is not None
                  and (p.client_inflight or 0) <= curve.plateau_at + 0.5)
                  or (p.queue is not None and p.queue < NO_QUEUE))]
    return max(cands, key=lambda p: p.inflight or 0.0) if cands else None


def fix_numbers(curve: CapacityCurve, physics: PhysicsBounds | None = None) -> FixNumbers | None:
    """The numbers for ``curve``'s run, or None when it has no throughput to go on."""
    physics = physics or PhysicsBounds()
    open_pts = [p for p in curve.points if p.offered_rate and p.concurrency is None]
    closed = [p for p in curve.points if p.concurrency]
    # Where each replica is meant to run: the measured knee, else the best operating point.
    best = (_point(curve, curve.knee_level) or _point(curve, curve.best_level)
            or _point(curve, curve.plateau_level))
    notes: list[str] = []
    if open_pts:
        top = max(open_pts, key=lambda p: p.offered_rate or 0.0)
        rate = float(top.offered_rate or 0.0)
        t = _service(curve, top)
        if t is None:
            return None
        needed = rate * t
        slots = math.ceil(HEADROOM * needed - 1e-9)
        notes.append(f"Little's law: {rate:.3g} req/s offered x {t:.3g} s in the engine = "
                     f"{needed:.3g} in flight, x {HEADROOM} = {slots}")
        bound, closed_loop = "Little's law", False
    elif closed:
        clients = max(p.concurrency or 0 for p in closed)
        t = _service(curve, best)
        if t is None:
            return None
        rate, needed = clients / t, float(clients)
        slots = clients
        notes.append(f"Little's law: {clients} clients keep {clients} requests in flight "
                     f"({clients} / {t:.3g} s in the engine = {rate:.3g} req/s unqueued)")
        bound, closed_loop = "clients", True
    else:
        return None
    basis = "measured"
    cap_replica = curve.capacity
    if curve.knee_reached and curve.knee:
        knee = max(1, round(curve.knee))  # slots are whole: a knee of 3.8 in flight is 4
        cap = 2 * knee
        if slots > cap:
            slots, bound = cap, "knee"
            notes.append(f"at most 2 x the measured knee ({knee} in flight) = {cap}")
    else:
        above = f"above {curve.above:.3g} in flight" if curve.above else "no level reached it"
        notes.append(f"the compute knee was not reached ({above})")
        if physics.compute_knee and slots > max(4, 2 * physics.compute_knee):
            slots, bound, basis = max(4, 2 * physics.compute_knee), "roofline", "estimate"
            notes.append(f"capped at 2 x the roofline's compute knee ({physics.compute_knee}): "
                         "an estimate")
    if physics.memory is not None and slots > physics.memory:
        slots, bound = max(1, physics.memory), "memory"
        notes.append(f"capped: memory holds {physics.memory}" + (
            f" ({physics.memory_why})" if physics.memory_why else ""))
    elif physics.memory is not None:
        notes.append(f"memory holds {physics.memory} such sequences, more than that")
    else:
        notes.append("memory not checked (the model or device is unknown)")
    # Past a measured knee a replica does no better than at its best operating point,
    # which is where each of them is meant to run.
    per_replica = slots / t
    if curve.knee_reached:
        at_best = best.throughput if best is not None and best.throughput else cap_replica
        per_replica = min(per_replica, at_best or per_replica)
    # A replica within 5% of the rate (the noise the best operating point allows) is enough.
    replicas = max(1, math.ceil(rate / per_replica - WITHIN)) if per_replica else 1
    if replicas > 1:
        notes.append(f"{rate:.3g} req/s / {per_replica:.3g} req/s per replica = {replicas} replicas")
    measured = max((p.inflight or 0.0 for p in curve.points), default=0.0)
    if not curve.knee_reached and slots > 1.05 * measured:
        notes.append(f"the run measured up to {measured:.3g} running: beyond that the "
                     "prediction assumes a request's time in the engine holds (tune or "
                     "bench again to confirm)")
    ref = best if bound == "knee" else _unqueued_ttft(curve, slots)
    predicted: dict[str, float | None] = {"throughput": min(rate, replicas * per_replica),
                                          "ttft_p99": ref.ttft_p99 if ref is not None else None}
    notes.append(f"TTFT p99 after the change: as at {ref.level} ({ref.ttft_p99:.3g} s)"
                 if ref is not None and ref.ttft_p99 is not None else
                 "TTFT after the change: not predicted (no level ran unqueued at that load)")
    return FixNumbers(needed=needed, target_rate=rate, time_in_engine=t, slots=slots,
                      bound=bound, replicas=replicas, per_replica=per_replica, basis=basis,
                      predicted=predicted,
                      rests_on=notes, closed_loop=closed_loop)
