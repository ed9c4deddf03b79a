"""The run's recommendation from the fitted model (docs/design.md section 9).

``model_advice`` fits ``infersight.servermodel`` to the run, checks it on the run
itself and turns its limiter and typed fix into the run's one recommendation; the
text is rendered here from the fix's fields. Where the model finds nothing binding,
the rules' recommendation stands (host, memory and cache verdicts are not modelled).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from infersight.core.curve import Recommendation
from infersight.core.records import RunResult
from infersight.core.server_model import Fix, SelfCheck, ServerModel
from infersight.diagnose.fixes import slot_flag
from infersight.servermodel import fit_model, run_data, self_check
from infersight.servermodel.advise import advise

__all__ = ["ModelAdvice", "model_advice", "with_model"]

log = logging.getLogger(__name__)

#: The verdict each limiter stands for.
VERDICT_OF = {"slots": "slot_bound", "kv": "kv_bound", "compute": "compute_bound",
              "client": "client_limited", "upstream": "error_driven"}
_TITLE = {"slots": "Slot-bound", "kv": "KV-bound", "compute": "Compute-bound",
          "client": "Client-limited", "upstream": "Upstream errors"}


@dataclass(slots=True)
class ModelAdvice:
    model: ServerModel | None
    check: SelfCheck | None
    limiter: str | None
    evidence: str
    fix: Fix | None
    why_not_fitted: str = ""


def model_advice(result: RunResult, engine_slots: int | None = None) -> ModelAdvice:
    """Fit, check and advise; a run the model cannot be fitted to says why."""
    if not result.records:
        return ModelAdvice(None, None, None, "", None, "the run has no requests")
    try:
        d = run_data(result, engine_slots=engine_slots)
        m = fit_model(d)
    except ValueError as e:
        return ModelAdvice(None, None, None, "", None, str(e))
    sc = self_check(d, m)
    lim, why, fix = advise(d, m, sc)
    return ModelAdvice(m, sc, lim, why, fix)


def _num(v: float | None) -> str:
    return "?" if v is None else f"{v:.0f}"


def _text(adv: ModelAdvice, engine: str, no_number: str) -> str:
    fix, lim = adv.fix, adv.limiter or "none"
    head = f"{_TITLE.get(lim, 'Nothing binds')} (the fitted model): {adv.evidence}"
    if fix is None or fix.knob is None:
        tail = fix.rests_on.split("; ")[-1] if fix is not None and "; " in fix.rests_on else ""
        return f"{head}{'; ' + tail if tail else ''}."
    if fix.knob == "slots":
        verb = "raise" if (fix.to_value or 0) > (fix.from_value or 0) else "lower"
        act = f"{verb} {slot_flag(engine)} {_num(fix.from_value)} \u2192 {_num(fix.to_value)}"
        if no_number:
            act = f"{verb} {slot_flag(engine)} from {_num(fix.from_value)}"
    else:
        act = f"run {_num(fix.to_value)} replicas behind `infersight gateway`"
        if no_number:
            act = "run more replicas behind `infersight gateway`"
    if no_number:
        act += f" (no number beyond the measured range: {no_number})"
    return f"{head}; {act}."


def with_model(rules: Recommendation | None, adv: ModelAdvice, engine: str) -> Recommendation | None:
    """The run's recommendation: the model's where it names a limiter, else the rules'
    (with the model's limiter beside it)."""
    if adv.model is None or adv.limiter in (None, "none"):
        if rules is not None and adv.model is not None:
            rules.limiter, rules.fix = adv.limiter, adv.fix
        return rules
    fix = adv.fix
    assert fix is not None
    check = adv.check
    trusted = check is not None and check.trusted
    no_number = ""
    if fix.knob is not None and not trusted:
        beyond = (fix.knob == "slots" and (fix.to_value or 0) > adv.model.measured.get("n", 0)) \
            or fix.knob == "replicas"
        if beyond:  # no number the self-check does not support
            fix.basis = "estimate"
            no_number = check.why_not if check is not None else "the model was not checked"
    pred = fix.predicted
    rec = Recommendation(
        verdict=VERDICT_OF.get(adv.limiter or "", "healthy"), knob=fix.knob,
        direction=None if fix.knob is None else (
            "up" if (fix.to_value or 0) > (fix.from_value or 0) else "down"),
        current=int(fix.from_value) if fix.from_value is not None else None,
        target=int(fix.to_value) if fix.to_value is not None and fix.basis != "estimate" else None,
        replicas=int(fix.to_value) if fix.knob == "replicas" and fix.to_value else None,
        text=_text(adv, engine, no_number),
        predicted={} if no_number else {
            "throughput": pred.throughput, "ttft_p50": pred.ttft_p50,
            "ttft_p99": pred.ttft_p99, "tpot_p50": pred.tpot_p50},
        rests_on=fix.rests_on, basis=fix.basis, limiter=adv.limiter, fix=fix)
    return rec
