"""Which knob to search, which way, over which values (docs/design.md section 8).

The baseline's diagnosis chooses (``RunResult.recommendation``): slot-bound -> slots,
toward the number of section 5; compute-bound -> stop raising slots: threads where the
target has them, else slots down toward the measured knee; KV-bound -> a shorter
context. ``--knob`` overrides the choice and ``--values`` the ladder.

Settings are plain ``{knob: value}`` maps: ``slots`` (sequences decoded at once:
``--parallel``, ``--max-num-seqs``, a gateway upstream's concurrency), ``threads``
(compute threads) and ``ctx`` (context tokens per slot).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from infersight.core.curve import CapacityCurve, Recommendation
from infersight.core.errors import ConfigError

__all__ = ["KNOBS", "SearchSpace", "ladder", "search_space"]

#: Every knob, with what it is to a user.
KNOBS = {
    "slots": "requests decoded at once (--parallel, --max-num-seqs, an upstream's limit)",
    "threads": "compute threads",
    "ctx": "context tokens per slot",
}
#: The most values a ladder holds (a grid runs each once).
MAX_VALUES = 32


@dataclass(frozen=True, slots=True)
class SearchSpace:
    """The search tune will run: the knob, its values and where to start."""

    knob: str
    direction: str  # "up", "down" or "both"
    values: list[int]
    start: int  # index of the baseline's value
    guide: int  # index of the first value to try
    target: int | None
    #: Among equals the cheaper value: fewer slots or threads, but more context.
    prefer_low: bool
    #: Where the choice came from, in one sentence.
    reason: str


def ladder(knob: str, current: int, target: int | None, bounds: tuple[int, int]) -> list[int]:
    """The values to search: every integer of the range when it is short, else about
    :data:`MAX_VALUES` values spaced evenly on a log scale, always with the current
    value and the target."""
    lo, hi = bounds
    if knob == "ctx":
        top = max(current, target or current)
        vals = {v for v in (2**k for k in range(7, 20)) if lo <= v <= top}
    else:
        # Without a target the search may have to go far: up to 4x the current value.
        top = min(hi, max(2 * current, 2 * target) if target else max(4 * current, 8))
        span = top - lo + 1
        if span <= MAX_VALUES:
            vals = set(range(lo, top + 1))
        else:
            ratio = (top / lo) ** (1 / (MAX_VALUES - 1))
            vals = {round(lo * ratio**k) for k in range(MAX_VALUES)}
    vals |= {v for v in (current, target) if v is not None and lo <= v <= hi}
    return sorted(vals)


def _nearest(values: Sequence[int], want: float) -> int:
    return min(range(len(values)), key=lambda i: (abs(values[i] - want), values[i]))


def _from_recommendation(
    rec: Recommendation | None,
    curve: CapacityCurve | None,
    knobs: Mapping[str, tuple[int, int]],
    baseline: Mapping[str, int],
) -> tuple[str, str, int | None, str] | str:
    """(knob, direction, target, reason), or why there is nothing to tune."""
    first = "slots" if "slots" in knobs else next(iter(knobs))
    if rec is None:
        return first, "both", None, "the baseline's diagnosis made no recommendation"
    said = f"the baseline's diagnosis ({rec.verdict}): {rec.text}"
    if rec.knob in (None, "load") or rec.direction == "hold":
        return f"nothing to tune: {said}"
    if rec.knob == "replicas":
        if "threads" in knobs:
            return "threads", "up", None, f"{said}; tune cannot add replicas, so it tries threads"
        knee = curve.knee if curve is not None and curve.knee_reached else None
        current = baseline.get("slots")
        if knee is not None and current is not None and current > knee:
            return "slots", "down", round(knee), f"{said}; slots down toward the knee ({knee:g})"
        return f"nothing to tune here: {said} (more replicas, which tune cannot add)"
    knob = {"context": "ctx"}.get(rec.knob, rec.knob)
    if knob not in knobs:
        return first, "both", None, f"{said}; this target has no {rec.knob} setting to try"
    direction = rec.direction if rec.direction in ("up", "down") else "both"
    if knob == "ctx":
        return knob, "down", None, said
    return knob, direction, rec.target, said


def search_space(
    rec: Recommendation | None,
    curve: CapacityCurve | None,
    baseline: Mapping[str, int],
    knobs: Mapping[str, tuple[int, int]],
    *,
    knob: str | None = None,
    values: Sequence[int] | None = None,
) -> SearchSpace | str:
    """The search space, or the one sentence that says why there is nothing to search."""
    if not knobs:
        return "this target has no setting tune can change"
    got = _from_recommendation(rec, curve, knobs, baseline)
    if knob is None:
        if isinstance(got, str):
            return got
        knob, direction, target, reason = got
    elif knob not in knobs:
        raise ConfigError(f"--knob {knob}: this target can change {', '.join(knobs)}")
    elif not isinstance(got, str) and got[0] == knob:
        _, direction, target, reason = got
    else:
        direction, target, reason = "both", None, f"--knob {knob}"
    current = baseline[knob]
    lo, hi = knobs[knob]
    if target is not None and not lo <= target <= hi:
        reason += f" (target {target} is outside {lo}..{hi}: capped)"
        target = min(hi, max(lo, target))
    vals = sorted(set(values)) if values else ladder(knob, current, target, (lo, hi))
    if current not in vals:
        vals = sorted({*vals, current})
    start = vals.index(current)
    if target is not None and target in vals and target != current:
        guide = vals.index(target)
    elif direction == "down":
        guide = _nearest(vals, current / 2) if start > 0 else start
    else:
        guide = _nearest(vals, current * 2)
    if guide == start:
        guide = start + 1 if start + 1 < len(vals) and direction != "down" else max(0, start - 1)
    return SearchSpace(knob, direction, vals, start, guide, target, knob != "ctx", reason)
