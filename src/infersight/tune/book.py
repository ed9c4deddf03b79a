"""The trials of one ``tune`` run and what the search knows of them (docs/design.md
section 8): each trial run and scored, its call against the baseline, the model
refitted on it, the budget, and the settings seen as indices for the searches
(``value``, ``compare``) and the model (``guess``, ``outcome``).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping

from infersight.core.tune_result import TrialRecord, TuneResult
from infersight.stats.significance import (
    BETTER,
    DEFAULT_DELTA,
    WORSE,
    MetricCall,
    compare_metric,
)
from infersight.stats.slices import LevelData
from infersight.tune.confirm import confirms
from infersight.tune.knobs import SearchSpace
from infersight.tune.model import TrialModel
from infersight.tune.objective import Scored, objective_metric, score
from infersight.tune.propose import Guess, Outcome
from infersight.tune.search import StopSearch
from infersight.tune.trial import Measured, TrialRun, TuneOptions, TuneWatcher, no_answer

__all__ = ["TrialBook"]


class TrialBook:
    """Runs trials through ``run_trial`` and keeps them (a TuneSession's base)."""

    def __init__(
        self,
        opts: TuneOptions,
        run_trial: Callable[[Mapping[str, int], str, str], TrialRun],
        *,
        watcher: TuneWatcher | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.opts = opts
        self.run_trial = run_trial
        self.watcher = watcher
        self.clock = clock
        self.t0 = clock()
        self.delta = DEFAULT_DELTA
        self.result = TuneResult(
            run_id=uuid.uuid4().hex[:12],
            target=dict(opts.target),
            search=opts.search,
            objective="goodput" if opts.slo else "throughput",
            slo=dict(opts.slo),
            baseline=dict(opts.baseline),
            budget_s=opts.budget_s,
        )
        self.space: SearchSpace | None = None
        self._by_index: dict[int, Measured] = {}
        self._cmp: dict[tuple[int, int], int] = {}
        self._baseline: Measured | None = None
        self._aa: Measured | None = None
        self.model = TrialModel(opts.slo, per_slot=opts.per_slot)
        self._uses_model = False

    # -- trials ---------------------------------------------------------------------
    def _trial(
        self,
        setting: Mapping[str, int],
        role: str,
        *,
        guess: Guess | None = None,
        proposed: str | None = None,
        confirms: Measured | None = None,
    ) -> Measured:
        index = len(self.result.trials) + 1
        name = self._name(index, setting)
        if self.watcher:
            self.watcher.trial_started(index, role, setting)
        started = time.time()
        run = self.run_trial(dict(setting), name, role)
        m = self._record(
            index, setting, role, run, started, guess=guess, proposed=proposed, confirms=confirms
        )
        if m.trial.status == "partial":
            self.result.stopped = "interrupted"
            raise StopSearch
        return m

    @staticmethod
    def _name(index: int, setting: Mapping[str, int]) -> str:
        return f"{index:02d}-" + "-".join(f"{k}{v}" for k, v in sorted(setting.items()))

    def _record(
        self,
        index: int,
        setting: Mapping[str, int],
        role: str,
        run: TrialRun,
        started: float,
        *,
        guess: Guess | None = None,
        proposed: str | None = None,
        confirms: Measured | None = None,
    ) -> Measured:
        """A trial's run as a TrialRecord, scored, called against the baseline, fed to
        the model and kept (a partial one is the caller's to stop on)."""
        rec = TrialRecord(
            index=index,
            role=role,
            setting=dict(setting),
            result=run.path,
            started=run.started or started,
            wall_s=run.wall,
            proposed=proposed,
            predicted=guess.value if guess else None,
            predicted_slo_met=guess.slo_met if guess else None,
            node=run.node,
        )
        scored, runs = Scored(), []
        if run.error is not None:
            rec.status, rec.error, rec.error_message = "failed", run.error.kind, str(run.error)
        elif run.result is not None:
            scored = score(run.result, self.opts.slo, levels=run.levels)
            runs = [scored.data] if scored.data is not None else []
            rec.status = "partial" if run.result.partial else "ok"
            if scored.data is None or not any(r.ok for r in scored.data.records):
                rec.status, rec.error, rec.error_message = "failed", *no_answer(run.result)
            rec.level, rec.objective, rec.low, rec.high = (
                scored.level,
                scored.value,
                scored.low,
                scored.high,
            )
            rec.slo_met, rec.slo_margin = scored.slo_met, scored.margin
            rec.ttft_p99, rec.tpot_p99 = scored.ttft_p99, scored.tpot_p99
            if run.result.recommendation is not None:
                rec.verdict = run.result.recommendation.verdict
                rec.advice = run.result.recommendation.text
        if self._baseline is not None and runs:
            rec.vs_baseline = self._call(self._baseline.runs, runs)
        if rec.status == "ok" and run.result is not None and "slots" in setting:
            self.model.add(self._name(index, setting), run.result, setting["slots"], run.levels)
        if confirms is not None:
            self._judge(confirms, rec, scored)
        self.result.trials.append(rec)
        if self.watcher:
            self.watcher.trial_done(rec, self.result.objective)
        return Measured(rec, scored, runs, run.result)

    def _call(self, a: list[LevelData], b: list[LevelData]) -> MetricCall:
        return compare_metric(
            a, b, objective_metric(self.opts.slo), delta=self.delta, slo=self.opts.slo
        )

    def _trial_time(self) -> float:
        walls = [t.wall_s for t in self.result.trials if t.wall_s > 0]
        return sum(walls) / len(walls) if walls else 0.0

    def _check_budget(self, trials_left: int) -> None:
        budget = self.opts.budget_s
        if budget is None:
            return
        if self.clock() - self.t0 + self._trial_time() * trials_left > budget:
            self.result.stopped = "budget"
            raise StopSearch

    # -- the search's view of the settings ---------------------------------------------
    def _setting(self, i: int) -> dict[str, int]:
        assert self.space is not None
        return {**self.opts.baseline, self.space.knob: self.space.values[i]}

    def _guess(self, i: int) -> Guess | None:
        """The model's objective at setting ``i`` (None where it is not used)."""
        assert self.space is not None
        return self.model.guess(self.space.values[i]) if self._uses_model else None

    def _measure(self, i: int, guess: Guess | None = None, proposed: str | None = None) -> Measured:
        if i not in self._by_index:
            self._check_budget(2)  # this trial and the winner's re-run
            if proposed is None:
                guess = self._guess(i)
            self._by_index[i] = self._trial(
                self._setting(i), self.opts.search, guess=guess, proposed=proposed
            )
        return self._by_index[i]

    def _outcome(self, m: Measured) -> Outcome:
        ok = m.trial.status == "ok"
        return Outcome(
            m.scored.value if ok else None, m.scored.slo_met, oom=m.trial.error == "OutOfMemory"
        )

    def _value(self, i: int) -> float | None:
        m = self._measure(i)
        return m.scored.value if m.trial.status == "ok" else None

    def _compare(self, i: int, j: int) -> int:
        if (i, j) not in self._cmp:
            a, b = self._measure(i), self._measure(j)
            va, vb = self._value(i), self._value(j)
            if va is None or vb is None:
                r = (va is not None) - (vb is not None)
            elif self.opts.slo and a.scored.slo_met != b.scored.slo_met:
                r = 1 if a.scored.slo_met else -1
            else:
                call = self._call(b.runs, a.runs).call
                r = 1 if call == BETTER else -1 if call == WORSE else 0
            self._cmp[(i, j)], self._cmp[(j, i)] = r, -r
        return self._cmp[(i, j)]

    def _judge(self, trial: Measured, rec: TrialRecord, again: Scored) -> str:
        """Mark ``rec`` as confirming ``trial`` or not; why, in words."""
        held, why = confirms(trial.scored, again, self.opts.slo, self.delta)
        rec.confirms, rec.confirmed = trial.trial.index, held
        return why
