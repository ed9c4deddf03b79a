"""The TuneResult document (docs/design.md section 8): every trial ``tune`` ran, the
setting it chose and whether the change is real.

It lives in ``core`` beside the RunResult because two features read it: ``tune``
writes it, ``report`` renders it. Each trial names its own RunResult file, so every
number here can be checked against the run it came from.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel, Field, ValidationError

from infersight.core.atomic import write_atomic
from infersight.core.errors import ConfigError, read_user_file
from infersight.core.metric_call import MetricCall
from infersight.core.server_model import ServerModel
from infersight.core.settings import config_error

__all__ = [
    "ModelPoint",
    "TrialRecord",
    "TuneResult",
    "load_tune_result",
    "save_tune_result",
]

TUNE_SCHEMA_VERSION = 1


class TrialRecord(BaseModel):
    """One setting measured once: a bench run against it, or why it failed."""

    index: int
    #: "baseline", "a/a" (the baseline again, for the noise floor), "guided", "grid" or
    #: "rerun" (the choice, measured again at the end to confirm it).
    role: str
    setting: dict[str, int]
    #: "ok", "failed" (did not start, or answered nothing) or "partial" (stopped).
    status: str = "ok"
    #: The typed error's kind (docs/design.md section 3) and its one line.
    error: str | None = None
    error_message: str | None = None
    #: The trial's RunResult file, relative to the TuneResult's folder.
    result: str | None = None
    #: The level the objective came from (the trial's best).
    level: str | None = None
    #: Goodput under the SLO, else throughput (req/s), and its 95% interval.
    objective: float | None = None
    low: float | None = None
    high: float | None = None
    #: Whether the level met every SLO; ``slo_margin`` is its worst check's value over
    #: its limit (at most 1 when met), for "the closest setting".
    slo_met: bool | None = None
    slo_margin: float | None = None
    ttft_p99: float | None = None
    tpot_p99: float | None = None
    #: The objective against the baseline (its two runs), with the call.
    vs_baseline: MetricCall | None = None
    #: The model's objective for this trial, fitted on the trials before it (None: no
    #: model), and whether it predicted the SLO met.
    predicted: float | None = None
    predicted_slo_met: bool | None = None
    #: Why the search tried this setting ("the model's predicted best", ...).
    proposed: str | None = None
    #: A rerun: the trial whose setting it confirms, and whether it met the objective
    #: (the SLO, or the trial's objective within the noise floor).
    confirms: int | None = None
    confirmed: bool | None = None
    #: The diagnosis of the trial's run: its recommendation's verdict and text.
    verdict: str | None = None
    advice: str | None = None
    started: float = Field(default_factory=time.time)
    wall_s: float = 0.0
    #: With ``--ray``: the Ray node the trial's server and load generator ran on.
    node: str | None = None

    def predicted_text(self) -> str:
        """The model's objective for the trial: ``29.5``, ``79.3 (SLO missed)`` or ``-``."""
        if self.predicted is None:
            return "-"
        return f"{self.predicted:.3g}" + (
            " (SLO missed)" if self.predicted_slo_met is False else ""
        )

    def role_text(self) -> str:
        """The role, or for a confirmation run what it found: ``confirms #4``."""
        if self.confirms is None or self.confirmed is None:
            return self.role if self.node is None else f"{self.role} @{self.node[:8]}"
        return f"{'confirms' if self.confirmed else 'refutes'} #{self.confirms}"


class ModelPoint(BaseModel):
    """The model's objective at one value of the knob (fitted on every trial)."""

    value: int
    objective: float | None = None
    slo_met: bool | None = None


class TuneResult(BaseModel):
    """One ``infersight tune`` run."""

    schema_version: int = TUNE_SCHEMA_VERSION
    kind: str = "tune"
    run_id: str = ""
    created: float = Field(default_factory=time.time)
    #: True when the run stopped early (budget, Ctrl-C): the trials are what was done.
    partial: bool = False
    #: "done", "budget", "interrupted", "baseline failed", "too noisy", "nothing to tune",
    #: or "running" in the copy saved after each trial while tune runs.
    stopped: str = "done"
    #: What was tuned: kind ("embedded", "launch", "gateway") and how it was reached.
    target: dict[str, Any] = Field(default_factory=dict)
    knob: str | None = None
    direction: str | None = None
    values: list[int] = Field(default_factory=list)
    baseline: dict[str, int] = Field(default_factory=dict)
    #: Where the knob and direction came from: the baseline's diagnosis (verdict, text,
    #: target, rests_on), or the user's --knob.
    guide: dict[str, Any] = Field(default_factory=dict)
    #: "guided" (the model's proposals; for threads and context, the diagnosis, then
    #: bisection) or "grid" (every value).
    search: str = "guided"
    #: The model of the server fitted on every trial (slots only; None: not used), and
    #: its objective at each value searched.
    model: ServerModel | None = None
    model_curve: list[ModelPoint] = Field(default_factory=list)
    #: "goodput" (requests/s within the SLO) or "throughput" (best sustainable req/s).
    objective: str = "throughput"
    slo: dict[str, float] = Field(default_factory=dict)
    #: δ: a change counts only beyond it; measured by the A/A pair, else 5%.
    noise_floor: float | None = None
    noise_basis: str = ""
    #: With ``--ray``: the nodes the trials ran on, each with its comparability key and
    #: its own A/A noise floor (docs/design.md section 8).
    nodes: list[dict[str, Any]] = Field(default_factory=list)
    trials: list[TrialRecord] = Field(default_factory=list)
    #: The choice, confirmed by a run of its own (a refuted choice is never kept).
    chosen: dict[str, int] | None = None
    chosen_trial: int | None = None
    #: The trial that confirmed the choice (its rerun, or the A/A run for the baseline);
    #: None when the run stopped before it.
    confirmed_by: int | None = None
    #: The winner's re-run against the baseline, every metric with its call.
    before_after: list[MetricCall] = Field(default_factory=list)
    #: The objective's call for the change (before/after).
    verdict: str | None = None
    #: Whether the chosen setting's confirmation run met the SLO (None without an SLO
    #: or a confirmation), and the closest trial when no setting met it.
    slo_met: bool | None = None
    closest_trial: int | None = None
    summary: str = ""
    budget_s: float | None = None
    wall_s: float = 0.0
    notes: list[str] = Field(default_factory=list)

    def trial(self, index: int | None) -> TrialRecord | None:
        """The trial with this index, if any."""
        return next((t for t in self.trials if t.index == index), None)


def save_tune_result(result: TuneResult, path: str | Path) -> Path:
    """Write atomically (temp file + rename), as RunResults are."""
    return write_atomic(
        path, orjson.dumps(result.model_dump(mode="json"), option=orjson.OPT_INDENT_2)
    )


def load_tune_result(path: str | Path) -> TuneResult:
    """Load and validate a TuneResult file; one ConfigError line otherwise."""
    p = Path(path)
    data = read_user_file(p)
    try:
        doc = orjson.loads(data)
        if not isinstance(doc, dict) or doc.get("kind") != "tune":
            raise ConfigError(f"{p}: not an infersight TuneResult")
        return TuneResult.model_validate(doc)
    except orjson.JSONDecodeError as e:
        raise ConfigError(f"{p}: not JSON ({e})") from None
    except ValidationError as e:
        raise config_error(e) from None
