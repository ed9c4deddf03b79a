"""The fitted model beside the run's recommendation (docs/design.md section 9).

``model_advice`` fits ``infersight.servermodel`` to the run, checks it on the run
itself, and names the limiter and the model's typed fix.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from infersight.core.records import RunResult
from infersight.core.server_model import Fix, SelfCheck, ServerModel
from infersight.servermodel import fit_model, run_data, self_check
from infersight.servermodel.advise import advise
from infersight.servermodel.binding import level_limiters, operating

__all__ = ["ModelAdvice", "model_advice"]


@dataclass(slots=True)
class ModelAdvice:
    model: ServerModel | None
    check: SelfCheck | None
    limiter: str | None
    evidence: str
    fix: Fix | None
    #: Each fitted level's limiter and its evidence (the operating level's is the run's).
    levels: dict[str, tuple[str, str]] = field(default_factory=dict)


def model_advice(result: RunResult, engine_slots: int | None = None) -> ModelAdvice:
    """Fit, check and advise; no model for a run it cannot be fitted to (the client-limited
    one says so in its evidence)."""
    if not result.records:
        return ModelAdvice(None, None, None, "", None)
    d = run_data(result, engine_slots=engine_slots)
    if d.levels and all(lv.at_ceiling for lv in d.levels):
        return ModelAdvice(
            None,
            None,
            "client",
            "every level was client-limited: the load "
            "generator, not the server, set the pace; nothing to fit",
            None,
        )
    try:
        m = fit_model(d)
    except ValueError:
        return ModelAdvice(None, None, None, "", None)
    sc = self_check(d, m)
    lim, why, fix = advise(d, m, sc)
    levels = level_limiters(d, m)
    top = operating(d, m)
    if top is not None and lim != "client":
        levels[top.name] = (lim, why)  # the run's limiter is its operating level's
    return ModelAdvice(m, sc, lim, why, fix, levels=levels)
