"""What a tune trial is (docs/design.md section 8): the session's options, what the
trial runner returns, who is told as trials run, and a measured trial.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from infersight.core.errors import InfersightError
from infersight.core.records import RunResult
from infersight.core.tune_result import TrialRecord
from infersight.stats.slices import LevelData
from infersight.tune.objective import Scored

__all__ = ["Measured", "TrialRun", "TrialSpec", "TuneOptions", "TuneWatcher", "no_answer"]


@dataclass(slots=True)
class TrialRun:
    """What ``run_trial`` returns: the run (and where it was saved), or why it failed."""

    result: RunResult | None = None
    path: str | None = None
    error: InfersightError | None = None
    wall: float = 0.0
    #: The levels the objective may come from (None: every level). A baseline run
    #: with extra levels for its diagnosis names the one all trials share.
    levels: list[str] | None = None
    #: Where it ran (``--ray``: the Ray node's id; None: this machine).
    node: str | None = None
    #: When it started (epoch seconds), where a batch's trials start apart (``--ray``).
    started: float | None = None


@dataclass(slots=True)
class TrialSpec:
    """One trial for a worker slot (``--ray``): its setting, name and role, and the
    slot that asked for it (None: the first free one)."""

    setting: dict[str, int]
    name: str
    role: str
    slot: int | None = None


class TuneWatcher(Protocol):
    """Told as trials start and end (the progress bar, the console lines)."""

    def planned(self, total: int) -> None: ...
    def trial_started(self, index: int, role: str, setting: Mapping[str, int]) -> None: ...
    def trial_done(self, trial: TrialRecord, objective: str) -> None: ...


@dataclass
class TuneOptions:
    """Everything the session decides with (the entrypoint builds it from the flags)."""

    baseline: dict[str, int]
    #: The knobs this target can change, each with its allowed range.
    knobs: dict[str, tuple[int, int]]
    search: str = "guided"
    slo: dict[str, float] = field(default_factory=dict)
    knob: str | None = None
    values: list[int] | None = None
    budget_s: float | None = None
    target: dict[str, Any] = field(default_factory=dict)
    #: Each trial keeps as many requests in flight as its slots (False: every trial
    #: runs the levels the user gave); the model predicts a trial the same way.
    per_slot: bool = True


@dataclass
class Measured:
    """A trial as the session keeps it: its record, score and levels."""

    trial: TrialRecord
    scored: Scored
    runs: list[LevelData]
    result: RunResult | None = None


def no_answer(result: RunResult) -> tuple[str, str]:
    """A trial with nothing to measure: its requests' most common error, else DataError."""
    kinds = Counter(r.error for r in result.records if not r.ok and r.error)
    if kinds:
        kind, n = kinds.most_common(1)[0]
        return kind, f"no request of the trial completed ({n} x {kind})"
    return "DataError", "the trial has no completed request to measure"
