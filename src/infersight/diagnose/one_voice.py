"""One limiter, one fix (docs/design.md section 9, "One voice").

The fitted model decides each level's limiter and the run's; the rules' readings
(scrapes, thresholds, shares) stay as evidence under it. A rule verdict that names
another limiter than the model's at its level is removed and said once, as one
"disagrees" line that names both; it never stands as a second verdict or fix. The
run's recommendation takes its verdict, limiter, knob and typed fix from the model, with
the detected engine's own setting for that knob.
"""

from __future__ import annotations

from collections.abc import Sequence

from infersight.core.curve import CapacityCurve, Recommendation
from infersight.core.verdicts import Evidence, Verdict
from infersight.diagnose.knee import knee_evidence
from infersight.diagnose.voice_rec import Voice, model_recommendation
from infersight.diagnose.voice_terms import DECIDED, KNOBS, LIMITER_VERDICT, TITLES

__all__ = [
    "DECIDED",
    "Voice",
    "agreement",
    "speak",
    "spoken_once",
]


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


def spoken_once(rec: Recommendation | None, verdicts: Sequence[Verdict]) -> str | None:
    """What speaks with a second voice in a diagnosed run (None: one voice): no
    recommendation or no model's limiter, a recommendation whose parts disagree, or a
    level with two limiter verdicts."""
    if rec is None:
        return "no recommendation"
    if rec.limiter is None:
        return "no model: no limiter"
    why = agreement(rec)
    if why:
        return why
    per: dict[str | None, int] = {}
    for v in verdicts:
        per[v.level] = per.get(v.level, 0) + (v.id in DECIDED)
    two = [str(lv) for lv, n in per.items() if n > 1]
    return f"two limiter verdicts at {', '.join(two)}" if two else None


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


def settle_levels(
    verdicts: list[Verdict],
    limits: dict[str, tuple[str, str]],
    rec: Recommendation | None,
    curve: CapacityCurve | None = None,
) -> list[Verdict]:
    """Each level's verdicts under the model's limiter for that level: the rule
    verdict that names it stays, with the run's one fix; one that names another is
    dropped and said in one "disagrees" line; where no rule named the model's limiter,
    its verdict is made from the model (a compute one with the measured knee)."""
    out: list[Verdict] = []
    levels = list(dict.fromkeys(v.level for v in verdicts))
    for level in levels:
        here = [v for v in verdicts if v.level == level]
        if level not in limits:
            out.extend(here)
            continue
        lim, why = limits[level]
        want = LIMITER_VERDICT.get(lim)
        # where the model names a limiter, the rules' "no limiter found" is a reading
        # against it too; where it cannot tell from one level, so is any
        gone = (*DECIDED, "healthy") if want in DECIDED or lim == "unknown" else DECIDED
        if lim == "compute":  # their fixes (more slots, more load) contradict compute
            gone = (*gone, "under_loaded", "busy_illusion")
        keep = [v for v in here if v.id not in gone or v.id == want]
        dropped = [v for v in here if v not in keep]
        main = next((v for v in keep if v.id == want), None)
        if main is None and want in DECIDED and here:
            main = here[0].model_copy(
                update={
                    "id": want,
                    "title": TITLES[want],
                    "summary": f"The fitted model: {why}.",
                    # The model's own reading first: a verdict always says what it rests on.
                    "evidence": [
                        Evidence(
                            key="limiter",
                            name="limiter (the fitted model)",
                            value=lim,
                            source=f"the fitted model: {why}",
                        ),
                        *(knee_evidence(curve, level) if lim == "compute" else []),
                        *(e for d in dropped for e in d.evidence if e.key != "note"),
                    ],
                    "confidence": 0.8,
                    "fixes": [],
                    "actions": [],
                    "marginal": False,
                }
            )
            keep.insert(0, main)
        if main is not None and main.id in DECIDED:
            fix = ([rec.text], [rec.fix]) if rec is not None else ([], [])
            main.fixes, main.actions = fix
            if not main.summary.startswith("The fitted model"):
                main.summary = f"{main.summary} The fitted model: {why}."
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
        # the rules cannot read compute (the model's step time does): their "healthy"
        # is no reading against it
        named = want in DECIDED and lim != "compute"
        against = [d for d in dropped if d.id != "healthy" or named]
        if against and keep:
            target = main if main is not None else keep[0]
            target.evidence.append(_disagrees(against, lim, why))
        out.extend(keep)
    return out


def speak(
    verdicts: list[Verdict], rules_rec: Recommendation | None, vo: Voice
) -> tuple[Recommendation | None, list[Verdict]]:
    """The run's one recommendation and each level's verdicts under the model; where
    the rules' order would have led with another verdict, one line says so."""
    rec, adv = model_recommendation(verdicts, vo), vo.adv
    if rec is not None and rules_rec is not None and rules_rec.verdict != rec.verdict:
        rec.disagrees = (
            f"the rules read {rules_rec.verdict} ({rules_rec.text}); the model's limiter "
            f"is {rec.limiter}: {adv.evidence}"
        )
    return rec, settle_levels(verdicts, adv.levels, rec, vo.curve)
