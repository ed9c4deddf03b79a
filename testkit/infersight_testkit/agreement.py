"""Do two measurements of one server get the same advice? The importer tests and
benchmarks/import_agreement.py compare another tool's run, read by infersight, with
infersight's own bench of the same server: the same verdict, knob and direction, the
same fitted model (its slot limit and binding constraint), and fix numbers within one.

    from infersight.diagnose import diagnose_run
    from infersight_testkit.agreement import advice, disagreements

    theirs, ours = advice(diagnose_run(imported)), advice(diagnose_run(benched))
    assert disagreements(theirs, ours) == [], (theirs.text, ours.text)

Diagnose the runs now (``diagnose_run``), not from their stored diagnosis, so both sides
are judged by today's rules. This module takes the diagnosis rather than the run: the
test-support package imports only ``infersight.core`` (tests/unit/test_layering.py).

The fix's number is the recommendation's target where the model's self-check allows
one, else the fitted model's own number (``Recommendation.fix.to_value``, shown as an
estimate): three levels rarely let a leave-one-level-out check trust a number past the
measured range, but the model still names one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from infersight.core.curve import Recommendation
from infersight.core.server_model import ServerModel

__all__ = ["Advice", "advice", "disagreements"]


class _Fitted(Protocol):
    """The fitted model beside a diagnosis (``infersight.diagnose``'s ``ModelAdvice``)."""

    @property
    def model(self) -> ServerModel | None: ...


class Diagnosed(Protocol):
    """What ``infersight.diagnose.diagnose_run`` returns, as far as ``advice`` reads it."""

    @property
    def recommendation(self) -> Recommendation | None: ...

    @property
    def advice(self) -> _Fitted | None: ...


@dataclass(frozen=True)
class Advice:
    """One run's advice, in the fields two measurements must agree on."""

    verdict: str | None
    knob: str | None
    direction: str | None
    limiter: str | None
    number: float | None
    basis: str | None
    model_slots: float | None
    text: str


def advice(found: Diagnosed) -> Advice:
    """A run's advice, from its diagnosis (``diagnose_run(run)``)."""
    rec = found.recommendation
    model = found.advice.model if found.advice is not None else None
    slots = model.slots.value if model is not None and model.slots is not None else None
    if rec is None:
        return Advice(None, None, None, None, None, None, slots, "no recommendation")
    number = (
        rec.target
        if rec.target is not None
        else (rec.fix.to_value if rec.fix is not None else None)
    )
    return Advice(
        rec.verdict,
        rec.knob,
        rec.direction,
        rec.limiter,
        None if number is None else float(number),
        rec.basis,
        slots,
        rec.text,
    )


def disagreements(a: Advice, b: Advice) -> list[str]:
    """What differs between two runs' advice (empty: they agree)."""
    out = [
        f"{k}: {getattr(a, k)!r} vs {getattr(b, k)!r}"
        for k in ("verdict", "knob", "direction", "limiter", "model_slots")
        if getattr(a, k) != getattr(b, k)
    ]
    if a.number is None or b.number is None:
        out.append(f"fix number: {a.number} vs {b.number} (both must give one)")
    elif abs(a.number - b.number) > 1:
        out.append(f"fix number: {a.number:g} vs {b.number:g} (more than 1 apart)")
    return out
