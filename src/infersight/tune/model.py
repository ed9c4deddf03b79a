"""The model of the server fitted to tune's trials (docs/design.md sections 8 and 9).

Every trial that answered is one run of the same server at its own slot limit:
``servermodel.merge_runs`` joins them and one model is fitted to all (step time,
first token, admission), then run forward at any slot limit with the trials' own
workload. A trial's objective is predicted the way it is measured: the load a trial
at that setting gets (as many clients as slots, or the fixed levels the user gave),
aggregated as bench aggregates, the best level's goodput under the SLO (meeting it
before missing it), else its throughput.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial

import numpy as np

from infersight.core.records import RunResult
from infersight.core.server_model import Prediction, ServerModel
from infersight.servermodel import fit_model, predict_load, run_data
from infersight.servermodel.data import merge_runs
from infersight.servermodel.evaluate import level_workload
from infersight.tune.propose import Guess

__all__ = ["TrialModel", "objective_of"]

#: Requests simulated per predicted level (the figures settle well before this).
REQUESTS = 800


@dataclass(frozen=True, slots=True)
class _Level:
    """One level of the trials' load: its name, clients or rate, and its workload."""

    name: str
    concurrency: int | None
    rate: float | None
    prompt: np.ndarray
    output: np.ndarray


def objective_of(levels: Sequence[Prediction], slo: bool) -> Guess | None:
    """The trial's objective from its predicted levels, as ``tune.objective.score``
    takes it from measured ones."""
    preds = [p for p in levels if p.throughput is not None]
    if not preds:
        return None
    steady = [p for p in preds if p.sustainable is not False] or preds
    if slo:
        met = [p for p in steady if p.slo_met]
        pool, ok = (met, True) if met else (preds, False)
        return Guess(max(p.goodput or 0.0 for p in pool), ok)
    return Guess(max(p.throughput or 0.0 for p in steady))


class TrialModel:
    """One model of the server, refitted as trials are added."""

    def __init__(self, slo: Mapping[str, float], *, per_slot: bool) -> None:
        self.slo = dict(slo)
        #: Each trial keeps as many clients as its slots (else: the levels given).
        self.per_slot = per_slot
        self.runs: list[tuple[str, RunResult, float | None]] = []
        self._objective: list[str] = []
        self._levels: list[_Level] = []
        self._model: ServerModel | None = None
        self._fitted = 0
        #: Why the model could not be fitted (empty when it was).
        self.why_not = ""

    def add(self, tag: str, result: RunResult, slots: int, levels: Sequence[str] | None) -> None:
        """A trial that answered: its run, its slot limit and its objective's levels."""
        d = run_data(result)
        names = [lv.name for lv in d.levels if levels is None or lv.name in levels]
        self.runs.append((tag, result, float(slots)))
        self._objective += [f"{tag}/{n}" for n in names]
        if self._levels:
            return
        # The first trial's workload stands for every trial's: they share prompts and seed.
        for lv in d.levels:
            if lv.name not in names:
                continue
            self._levels.append(_Level(lv.name, lv.concurrency, lv.rate, *level_workload(d, lv)))

    def model(self) -> ServerModel | None:
        """The model fitted on every trial so far (None, with ``why_not``, when it
        cannot be)."""
        if self._fitted != len(self.runs) and self.runs:
            self._fitted = len(self.runs)
            try:
                d = merge_runs(self.runs)
                # Every level, client-limited ones too: a trial the client slowed is still
                # what tune measured and compares, and the overloaded trials that teach
                # the model where the step time grows are the ones a busy client lags on.
                names = [lv.name for lv in d.levels if d.ok[lv.idx].any()]
                self._model, self.why_not = fit_model(d, names), ""
            except ValueError as e:
                self._model, self.why_not = None, str(e)
        return self._model

    def _think(self, m: ServerModel, name: str | None) -> float:
        if name is not None:
            return m.think.get(f"{self.runs[0][0]}/{name}", 0.0)
        # The client's own turnaround between answer and next send: the median, as one
        # disturbed trial must not slow every prediction.
        got = [m.think[n] for n in self._objective if n in m.think]
        return float(np.median(got)) if got else 0.0

    def guess(self, slots: int) -> Guess | None:
        """The model's objective for a trial at ``slots``."""
        m = self.model()
        if m is None or not self._levels:
            return None
        # Each level's load: (level, clients, rate, think); per slot, one level at
        # ``slots`` clients.
        loads: list[tuple[_Level, int | None, float | None, float]]
        if self.per_slot:
            lv = self._levels[0]
            loads = [(lv, slots, None, self._think(m, None))]
        else:
            loads = [
                (lv, lv.concurrency, None, self._think(m, lv.name))
                if lv.concurrency is not None
                else (lv, None, lv.rate, 0.0)
                for lv in self._levels
                if lv.concurrency is not None or lv.rate
            ]
        at = partial(predict_load, m, slots=slots, requests=REQUESTS, slo=self.slo or None)
        preds = [at(lv.prompt, lv.output, concurrency=c, rate=r, think=t) for lv, c, r, t in loads]
        return objective_of(preds, bool(self.slo))

    def guesses(self, values: Sequence[int]) -> list[Guess | None] | None:
        """The model's objective at every value (None when it cannot be fitted)."""
        if self.model() is None:
            return None
        return [self.guess(v) for v in values]
