"""One limiter, one fix (docs/design.md section 9, "One voice").

The fitted model decides each level's limiter and the run's; the rules' readings
(scrapes, thresholds, shares) stay as evidence under it. A rule verdict that names
another limiter than the model's at its level is removed and said once, as one
"disagrees" line that names both; it never stands as a second verdict or fix. The
run's recommendation takes its verdict, limiter, knob and typed fix from the model, with
the detected engine's own setting for that knob.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from infersight.core.curve import Recommendation
from infersight.core.server_model import Fix, action
from infersight.core.verdicts import Evidence, Verdict
from infersight.diagnose.fixes import kv_flag
from infersight.diagnose.model_advice import ModelAdvice
from infersight.diagnose.model_numbers import FixNumbers

__all__ = [
    "DECIDED",
    "LIMITER_VERDICT",
    "agreement",
    "kv_recommendation",
    "model_recommendation",
    "settle_levels",
    "speak",
]

#: The verdict that names each limiter of the model.
LIMITER_VERDICT = {
    "slots": "slot_bound",
    "kv": "kv_bound",
    "compute": "compute_bound",
    "upstream": "error_driven",
    "client": "client_limited",
}
#: Rule verdicts that say what limits the server: the model decides these.
DECIDED = ("slot_bound", "kv_bound", "compute_bound", "capacity")
#: The knobs that may turn each limiter (replicas: more of everything).
KNOBS: dict[str, tuple[str | None, ...]] = {
    "slots": ("slots", "replicas"),
    "kv": ("kv", "replicas"),
    "compute": ("replicas", "slots", None),
    "upstream": (None,),
    "client": (None,),
}
_TITLES = {
    "slot_bound": "Queueing: slot-bound",
    "kv_bound": "Queueing: KV-capacity-bound",
    "compute_bound": "Compute-bound",
}


def agreement(rec: Recommendation) -> str | None:
    """Why the recommendation's verdict, limiter, knob and fix do not name one
    constraint (None: they do)."""
    lim = rec.limiter
    if lim is None:
        return None  # no model: the rules' recommendation alone
    fix_knob = rec.fix.knob if rec.fix is not None else None
    if rec.knob != fix_knob:
        return f"knob {rec.knob} but the fix turns {fix_knob}"
    want = LIMITER_VERDICT.get(lim)
    if want is not None and rec.verdict != want:
        return f"verdict {rec.verdict} but limiter {lim}"
    if want is None and rec.verdict in (*DECIDED, *LIMITER_VERDICT.values()):
        return f"verdict {rec.verdict} names a limiter, the model says {lim}"
    if lim in KNOBS and rec.knob not in KNOBS[lim]:
        return f"knob {rec.knob} does not turn the {lim} limit"
    return None


def _num(v: float | None) -> str:
    return "?" if v is None else f"{v:,.0f}"


def kv_recommendation(
    v: Verdict | None,
    fix: Fix | None,
    numbers: FixNumbers | None,
    engine: str,
    preemptions: float | None,
) -> Recommendation:
    """KV-bound: more KV room with the engine's own setting and the model's number."""
    where = f" at {v.level}" if v is not None and v.level else ""
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


def _named(lim: str) -> str:
    return "the limiter is not known from one level" if lim == "unknown" else lim


def _disagrees(dropped: Sequence[Verdict], lim: str, why: str) -> Evidence:
    said = "; ".join(f"{d.title}: {d.summary}" for d in dropped)
    return Evidence(
        key="disagrees",
        name="disagrees",
        value=f"the rules read {said} The model says {_named(lim)}: {why}.",
        source="diagnose rules against the fitted model",
    )


def _one_fix(v: Verdict, rec: Recommendation | None) -> None:
    """The verdict's fix lines that turn the run's knob (with their notes), else the
    run's fix itself: never a fix on another knob."""
    if rec is None:
        v.fixes, v.actions = [], []
        return
    knob = rec.fix.knob if rec.fix is not None else rec.knob
    acts = [v.action_of(i) for i in range(len(v.fixes))]
    same = [a is not None and (a.knob == knob or a.turns() == "hold") for a in acts]
    if v.id == rec.verdict and any(same):
        keep = [i for i, a in enumerate(acts) if same[i] or a is None]
        v.fixes, v.actions = [v.fixes[i] for i in keep], [acts[i] for i in keep]
    else:
        v.fixes, v.actions = [rec.text], [rec.fix]


def settle_levels(
    verdicts: list[Verdict],
    limits: dict[str, tuple[str, str]],
    rec: Recommendation | None,
) -> list[Verdict]:
    """Each level's verdicts under the model's limiter for that level: the rule
    verdict that names it stays (its fixes become the run's one fix); one that names
    another is dropped and said in one "disagrees" line; where no rule named the
    model's limiter, its verdict is made from the model."""
    out: list[Verdict] = []
    levels = [lv for lv in dict.fromkeys(v.level for v in verdicts)]
    for level in levels:
        here = [v for v in verdicts if v.level == level]
        if level not in limits:
            out.extend(here)
            continue
        lim, why = limits[level]
        want = LIMITER_VERDICT.get(lim)
        keep = [v for v in here if v.id not in DECIDED or v.id == want]
        dropped = [v for v in here if v not in keep]
        main = next((v for v in keep if v.id == want), None)
        if main is None and want in DECIDED and here:
            main = here[0].model_copy(
                update={
                    "id": want,
                    "title": _TITLES[want],
                    "summary": f"The fitted model: {why}.",
                    "evidence": [e for d in dropped for e in d.evidence if e.key != "note"],
                    "confidence": 0.8,
                    "fixes": [],
                    "actions": [],
                    "marginal": False,
                }
            )
            keep.insert(0, main)
        if main is not None and main.id in DECIDED:
            _one_fix(main, rec)
            if not main.summary.startswith("The fitted model"):
                main.summary = f"{main.summary} The fitted model: {why}."
        if lim == "unknown" or main is not None:
            keep = [v for v in keep if v.id != "healthy"]
        if not keep and here:
            title = "Limiter not known from one level" if lim == "unknown" else "Healthy"
            keep = [
                here[0].model_copy(
                    update={
                        "id": "healthy",
                        "title": title,
                        "summary": f"The fitted model: {why}.",
                        "evidence": [e for d in dropped for e in d.evidence if e.key != "note"],
                        "confidence": min(0.7, max(d.confidence for d in here)),
                        "fixes": [],
                        "actions": [],
                        "marginal": False,
                    }
                )
            ]
        if dropped and keep:
            target = main if main is not None else keep[0]
            target.evidence.append(_disagrees(dropped, lim, why))
        out.extend(keep)
    return out


def _stand_in(vid: str, level: str | None, verdicts: Sequence[Verdict]) -> Verdict:
    """The model's verdict where no rule named its limiter (for the fix's wording)."""
    like = next((v for v in reversed(verdicts) if v.level == level), verdicts[-1])
    return like.model_copy(
        update={"id": vid, "title": _TITLES.get(vid, vid), "evidence": [], "fixes": []}
    )


def model_recommendation(
    verdicts: Sequence[Verdict],
    adv: ModelAdvice,
    numbers: FixNumbers | None,
    engine: str,
    preemptions: float | None,
    top_level: str | None,
    rules: Callable[[Sequence[Verdict]], Recommendation | None],
) -> Recommendation | None:
    """The run's recommendation from the model's limiter and fix. ``rules`` words a
    recommendation from given verdicts (the rules' order and fixes): for slots and
    compute with the model's numbers, for errors and the client from their verdicts,
    and where nothing binds from a symptom that remains (a starved host, idle slots)."""
    lim = adv.limiter or "none"
    fix = adv.fix
    want = LIMITER_VERDICT.get(lim)
    if not verdicts:
        return None
    at = [v for v in verdicts if v.id == want]
    v = at[-1] if at else None
    if lim == "kv":
        return kv_recommendation(v, fix, numbers, engine, preemptions)
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
        chosen = [v or _stand_in(want, top_level, verdicts)]
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


def speak(
    verdicts: list[Verdict],
    rules_rec: Recommendation | None,
    adv: ModelAdvice,
    numbers: FixNumbers | None,
    engine: str,
    preemptions: float | None,
    top_level: str | None,
    rules: Callable[[Sequence[Verdict]], Recommendation | None],
) -> tuple[Recommendation | None, list[Verdict]]:
    """The run's one recommendation and each level's verdicts under the model; where
    the rules' order would have led with another verdict, one line says so."""
    rec = model_recommendation(verdicts, adv, numbers, engine, preemptions, top_level, rules)
    if rec is not None and rules_rec is not None and rules_rec.verdict != rec.verdict:
        rec.disagrees = (
            f"the rules read {rules_rec.verdict} ({rules_rec.text}); the model's limiter "
            f"is {rec.limiter}: {adv.evidence}"
        )
    return rec, settle_levels(verdicts, adv.levels, rec)
