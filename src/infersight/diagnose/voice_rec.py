"""The run's one recommendation from the model (docs/design.md section 9, "One voice"):
its verdict, limiter, knob and typed fix name the model's limiter; a KV limiter's fix
raises the KV cache to the model's number with the engine's own setting, preemptions in
its words; slots and compute are worded by the rules' recommendation with the model's
numbers; errors, the client and "nothing binds" keep the rules' wording of what remains.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from infersight.core.curve import CapacityCurve, Recommendation
from infersight.core.server_model import Fix, action
from infersight.core.verdicts import Verdict
from infersight.diagnose.fixes import kv_flag
from infersight.diagnose.model_advice import ModelAdvice
from infersight.diagnose.model_numbers import FixNumbers
from infersight.diagnose.voice_terms import DECIDED, LIMITER_VERDICT, TITLES

__all__ = ["Voice", "model_recommendation"]


@dataclass(frozen=True, slots=True)
class Voice:
    """What the run's recommendation is made from: the model's advice and numbers,
    the engine, the preemptions per second at the sized level, the most loaded level,
    the rules' wording of a recommendation from given verdicts, and the run's capacity
    curve (the measured knee a compute verdict quotes)."""

    adv: ModelAdvice
    numbers: FixNumbers | None
    engine: str
    preemptions: float | None
    top_level: str | None
    rules: Callable[[Sequence[Verdict]], Recommendation | None]
    curve: CapacityCurve | None = None


def _num(v: float | None) -> str:
    return "?" if v is None else f"{v:,.0f}"


def kv_recommendation(
    v: Verdict | None,
    fix: Fix | None,
    numbers: FixNumbers | None,
    engine: str,
    preemptions: float | None,
    top_level: str | None = None,
) -> Recommendation:
    """KV-bound: more KV room with the engine's own setting and the model's number
    (at the rule verdict's level, else the most loaded level)."""
    level = v.level if v is not None and v.level else top_level
    where = f" at {level}" if level else ""
    flag = kv_flag(engine)
    pre = (
        f"; {preemptions:.2g} preemptions/s: the engine evicts running sequences and "
        "recomputes them, so the lost throughput is KV's, not compute's"
        if preemptions
        else ""
    )
    if fix is not None and fix.knob == "kv":
        act = (
            f"raise the KV cache {_num(fix.from_value)} \u2192 {_num(fix.to_value)} tokens ({flag})"
        )
    elif fix is not None and fix.knob == "replicas":
        act = (
            f"more KV room within what the run measured would not serve the load; run "
            f"{_num(fix.to_value)} replicas behind `infersight gateway`"
        )
    else:
        act = f"raise the KV cache ({flag})"
        fix = Fix(knob="kv", direction="up", basis="estimate", rests_on="no number from the model")
    return Recommendation(
        verdict="kv_bound",
        knob=fix.knob,
        direction=fix.turns() or "up",
        current=None,
        target=None,
        replicas=int(fix.to_value) if fix.knob == "replicas" and fix.to_value else None,
        text=f"Queueing: KV-capacity-bound{where}: {act}{pre}.",
        predicted=dict(numbers.predicted) if numbers is not None else {},
        rests_on=numbers.why() if numbers is not None else fix.rests_on,
        basis=fix.basis,
        limiter="kv",
        fix=fix,
    )


def _stand_in(vid: str, level: str | None, verdicts: Sequence[Verdict]) -> Verdict:
    """The model's verdict where no rule named its limiter (for the fix's wording)."""
    like = next((v for v in reversed(verdicts) if v.level == level), verdicts[-1])
    return like.model_copy(
        update={"id": vid, "title": TITLES.get(vid, vid), "evidence": [], "fixes": []}
    )


def model_recommendation(verdicts: Sequence[Verdict], vo: Voice) -> Recommendation | None:
    """The run's recommendation from the model's limiter and fix. ``vo.rules`` words a
    recommendation from given verdicts (the rules' order and fixes): for slots and
    compute with the model's numbers, for errors and the client from their verdicts,
    and where nothing binds from a symptom that remains (a starved host, idle slots)."""
    adv, rules = vo.adv, vo.rules
    lim = adv.limiter or "none"
    fix = adv.fix
    want = LIMITER_VERDICT.get(lim)
    if not verdicts:
        return None
    at = [v for v in verdicts if v.id == want]
    v = at[-1] if at else None
    if lim == "kv":
        return kv_recommendation(v, fix, vo.numbers, vo.engine, vo.preemptions, vo.top_level)
    if lim == "unknown":
        return Recommendation(
            verdict="unknown",
            text=f"Limiter not known from one level: {adv.evidence}. Measure two loads or "
            "more (bench --concurrency 1,2,4,8 or several --rate) to find it.",
            rests_on=adv.evidence,
            basis="measured",
            limiter="unknown",
            fix=fix.model_copy(update={"knob": None}) if fix is not None else None,
        )
    if want is not None:
        chosen = [v or _stand_in(want, vo.top_level, verdicts)]
    else:
        named = (*DECIDED, *LIMITER_VERDICT.values(), "overloaded")
        chosen = [x for x in verdicts if x.id not in named]
    rec = rules(chosen)
    if rec is None:
        rec = Recommendation(
            verdict="healthy",
            text=f"No limiter found: {adv.evidence}; no change needed.",
            rests_on=adv.evidence,
            basis="measured",
        )
    rec.limiter = lim
    if lim in ("slots", "compute") and fix is not None:
        rec.fix = (
            fix
            if rec.knob == fix.knob
            else fix.model_copy(
                update={"knob": rec.knob, "direction": rec.direction, "to_value": rec.target}
            )
        )
    else:
        rec.fix = (
            action(rec.knob, rec.direction)  # type: ignore[arg-type]
            if rec.knob is not None
            else (fix.model_copy(update={"knob": None}) if fix is not None else None)
        )
    return rec
