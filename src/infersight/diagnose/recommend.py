"""The run's one recommendation (docs/design.md section 5, "One recommendation per run").

Each level's verdicts say what that level showed; the run gets one fix, from the verdict
that binds first in this order (a limit before a symptom), at the most loaded level that
showed it. Marginal verdicts never decide. A client-limited flag decides only when every
level was client-limited and no level found a limit of the server's own (a late client
makes no engine queue, no growing TPOT, no full KV cache): the flag is then the caveat
every output prints beside the fix.
:func:`reconcile` then takes out of the levels' verdicts any fix that points the other
way (a "downsize" at c=1 while the run needs more capacity, "raise the slots" past a
measured compute knee), and says where the run's fix is instead.
"""

from __future__ import annotations

from collections.abc import Sequence

from infersight.core.curve import CapacityCurve, Recommendation
from infersight.core.server_model import Fix
from infersight.core.verdicts import Verdict
from infersight.diagnose.fixes import slot_flag
from infersight.diagnose.model_numbers import FixNumbers

__all__ = ["recommend", "reconcile"]

#: Which verdict gives the run's fix, first to last.
ORDER = (
    "client_limited",
    "memory_pressure",
    "error_driven",
    "kv_bound",
    "compute_bound",
    "slot_bound",
    "capacity",
    "overloaded",
    "host_starved",
    "busy_illusion",
    "compute_bound_prefill",
    "bandwidth_bound_decode",
    "under_loaded",
    "healthy",
)
#: The knob each verdict's fix turns, and which way (None: nothing on the server).
_KNOB: dict[str, tuple[str | None, str]] = {
    "client_limited": (None, "hold"),
    "memory_pressure": ("slots", "down"),
    "error_driven": (None, "hold"),
    "kv_bound": ("context", "down"),
    "host_starved": ("threads", "down"),
    "busy_illusion": ("load", "up"),
    "under_loaded": ("load", "up"),
    "compute_bound_prefill": (None, "hold"),
    "bandwidth_bound_decode": (None, "hold"),
    "healthy": (None, "hold"),
}


#: Verdicts about the server's limit: when one of them fired, a client-limited flag is a
#: caveat beside it (a late client does not make a queue, a TPOT that grows or a KV cache
#: that fills), not the fix.
#: They rank right after client_limited in ORDER, from memory_pressure to host_starved.
_SERVER_LIMITS = ORDER[ORDER.index("memory_pressure") : ORDER.index("host_starved") + 1]


def _primary(verdicts: Sequence[Verdict]) -> Verdict | None:
    real = [v for v in verdicts if not v.marginal]
    levels = {v.level for v in verdicts}
    limited = {v.level for v in real if v.id == "client_limited"}
    server = any(v.id in _SERVER_LIMITS for v in real)
    real = [v for v in real if v.id != "client_limited" or (limited >= levels and not server)]
    rank = {vid: i for i, vid in enumerate(ORDER)}
    best: Verdict | None = None
    for v in real:  # verdicts come in level order: a tie goes to the more loaded level
        if best is None or rank.get(v.id, 99) <= rank.get(best.id, 99):
            best = v
    return best


def _current_slots(v: Verdict) -> int | None:
    s = v.evidence_value("slots")
    return round(float(s)) if isinstance(s, int | float) and s > 0 else None


def _where(v: Verdict) -> str:
    return f" at {v.level}" if v.level else ""


def _no_number(fix: FixNumbers) -> str:
    return f" (no number beyond the measured range: {fix.no_number})" if fix.no_number else ""


def _sized(v: Verdict, curve: CapacityCurve, fix: FixNumbers, engine: str) -> Recommendation:
    """Slots and replicas from the model's numbers (slot-bound, compute-bound)."""
    flag, current = slot_flag(engine), _current_slots(v) or fix.current
    rests = fix.why()
    reps = f" and run {fix.replicas} replicas" if (fix.replicas or 1) > 1 else ""
    knob: str | None
    target: int | None
    if v.id == "compute_bound":
        where = (
            f" from {curve.knee:.3g} in flight ({curve.knee_level}, measured)"
            if curve.knee_reached and curve.knee
            else ""
        )
        head = (
            f"Compute-bound by prefill{where}: prompts admitted together wait for each "
            "other's prefill, and more slots add latency, not throughput"
            if fix.prefill
            else f"Compute-bound{where}: more slots add latency, not throughput"
        )
        if current and fix.slots is not None and current > fix.slots:
            act, knob, direction, target = (
                f"lower {flag} {current} \u2192 {fix.slots}{reps}",
                "slots",
                "down",
                fix.slots,
            )
        elif (fix.replicas or 1) > 1 or fix.no_number:
            many = f"run {fix.replicas} replicas" if fix.replicas else "run more replicas"
            act = (
                f"keep {flag}{f' at {current}' if current else ''} and {many} (or faster "
                f"hardware){_no_number(fix)}"
            )
            knob, direction, target = "replicas", "up", fix.replicas
        else:
            act, knob, direction, target = (
                "keep the settings: the load fits one replica",
                None,
                "hold",
                None,
            )
        less = (
            "; less prefill per request helps too (prefix caching where prompts share a "
            "head, shorter prompts)"
            if fix.prefill
            else ""
        )
        text = f"{head}; {act}{less}."
    elif fix.slots is None:
        text = (
            f"{v.title}{_where(v)}: raise {flag} above {current or 'its limit'}{_no_number(fix)}."
        )
        knob, direction, target = "slots", "up", None
    elif current is None or fix.slots > current:
        step = f"{current} \u2192 {fix.slots}" if current else f"to {fix.slots}"
        text = f"{v.title}{_where(v)}: raise {flag} {step}{reps}."
        knob, direction, target = "slots", "up", fix.slots
    elif fix.slots < current:  # the model or memory puts the limit below the one set
        text = (
            f"{v.title}{_where(v)}: lower {flag} {current} \u2192 {fix.slots}{reps} "
            f"({fix.short()})."
        )
        knob, direction, target = "slots", "down", fix.slots
    elif fix.no_number or (fix.replicas or 1) > 1:
        many = f"run {fix.replicas} replicas" if fix.replicas else "run more replicas"
        text = (
            f"{v.title}{_where(v)}: more than {flag} {current} within what the run "
            f"measured would not serve the load; {many} behind `infersight gateway`"
            f"{_no_number(fix)}."
        )
        knob, direction, target = "replicas", "up", fix.replicas
    else:
        text = (
            f"{v.title}{_where(v)}: {flag} {current} covers what the load needs in flight"
            f"{'; run ' + str(fix.replicas) + ' replicas' if (fix.replicas or 1) > 1 else ''}."
        )
        knob, direction, target = (
            ("replicas", "up", fix.replicas) if (fix.replicas or 1) > 1 else (None, "hold", None)
        )
    return Recommendation(
        verdict=v.id,
        knob=knob,
        direction=direction,
        current=current if knob == "slots" else (1 if knob == "replicas" else None),
        target=target,
        replicas=fix.replicas,
        text=text,
        predicted=dict(fix.predicted),
        rests_on=rests,
        basis=fix.basis,
    )


def recommend(
    verdicts: Sequence[Verdict], curve: CapacityCurve | None, fix: FixNumbers | None, engine: str
) -> Recommendation | None:
    """The run's one recommendation, or None for a run without verdicts."""
    v = _primary(verdicts)
    if v is None:
        return None
    sized = v.id in ("compute_bound", "slot_bound")
    if sized and curve is not None and fix is not None:
        return _sized(v, curve, fix, engine)
    knob, direction = _KNOB.get(v.id, (None, "hold"))
    if v.id == "healthy" and curve is not None and curve.best_level:
        text = (
            f"No limiter found: no change needed; the best operating point is {curve.best_level}."
        )
    else:
        first = v.fixes[0] if v.fixes else "see the verdict's evidence"
        text = f"{v.title}{_where(v)}: {first}"
    target = v.evidence_value("recommended_slots") if v.id == "memory_pressure" else None
    return Recommendation(
        verdict=v.id,
        knob=knob,
        direction=direction,
        current=_current_slots(v) if knob == "slots" else None,
        target=target if isinstance(target, int) else None,
        text=text,
        rests_on=f"the {v.id} verdict{_where(v)}",
        basis="measured",
    )


def reconcile(verdicts: Sequence[Verdict], rec: Recommendation | None) -> None:
    """Drop the levels' fixes that point against the run's recommendation, by their
    typed actions (never by their words): a downsize while the run needs more, more
    slots while the run's fix is compute-bound or fewer slots."""
    if rec is None:
        return
    grow = rec.knob in ("slots", "replicas", "context", "threads") and rec.direction == "up"
    no_more_slots = rec.verdict == "compute_bound" or (
        rec.knob == "slots" and rec.direction == "down"
    )
    for v in verdicts:
        keep: list[tuple[str, Fix | None]] = []
        for i, text in enumerate(v.fixes):
            a = v.action_of(i)
            shrink = a is not None and a.knob == "replicas" and a.turns() == "down"
            more = a is not None and a.knob == "slots" and a.turns() == "up"
            if (shrink and (grow or rec.verdict != "under_loaded")) or (more and no_more_slots):
                continue
            keep.append((text, a))
        if len(keep) < len(v.fixes):
            keep.append((f"the run's recommendation, from every level: {rec.text}", rec.fix))
            v.fixes, v.actions = [t for t, _ in keep], [a for _, a in keep]
