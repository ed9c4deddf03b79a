"""One ``tune`` run (docs/design.md section 8): baseline, A/A pair, the diagnosis's
plan, the search, the winner again, and the before/after with its call.

The session never starts a server or a benchmark itself: it is given ``run_trial``
(setting, name, role), which measures one setting and returns its RunResult (or the typed error that stopped
it). So the same session drives the embedded engine, a launched server and the
gateway's limits, and the tests drive it with fakes.
"""

from __future__ import annotations

import math
import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from infersight.core.errors import InfersightError
from infersight.core.records import RunResult
from infersight.core.significance import (
    BETTER,
    DEFAULT_DELTA,
    WORSE,
    MetricCall,
    compare,
    compare_metric,
    noise_floor,
)
from infersight.core.slices import LevelData
from infersight.core.tune_result import TrialRecord, TuneResult
from infersight.tune.knobs import SearchPlan, plan_search
from infersight.tune.objective import Scored, objective_metric, score
from infersight.tune.search import StopSearch, choose, grid, guided, planned_trials
from infersight.tune.summary import summarize

__all__ = ["MAX_NOISE", "TrialRun", "TuneOptions", "TuneSession", "TuneWatcher"]

#: Past this A/A spread no setting can be shown better: tune says so instead of guessing.
MAX_NOISE = 0.25


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


@dataclass
class _Measured:
    trial: TrialRecord
    scored: Scored
    runs: list[LevelData]
    result: RunResult | None = None


def _no_answer(result: RunResult) -> tuple[str, str]:
    """A trial with nothing to measure: its requests' most common error, else DataError."""
    kinds = Counter(r.error for r in result.records if not r.ok and r.error)
    if kinds:
        kind, n = kinds.most_common(1)[0]
        return kind, f"no request of the trial completed ({n} x {kind})"
    return "DataError", "the trial has no completed request to measure"


class TuneSession:
    """Runs the trials and fills a TuneResult (partial when stopped)."""

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
            run_id=uuid.uuid4().hex[:12], target=dict(opts.target), search=opts.search,
            objective="goodput" if opts.slo else "throughput", slo=dict(opts.slo),
            baseline=dict(opts.baseline), budget_s=opts.budget_s,
        )
        self.plan: SearchPlan | None = None
        self._by_index: dict[int, _Measured] = {}
        self._cmp: dict[tuple[int, int], int] = {}
        self._baseline: _Measured | None = None

    # -- trials ---------------------------------------------------------------------
    def _trial(self, setting: Mapping[str, int], role: str) -> _Measured:
        index = len(self.result.trials) + 1
        name = f"{index:02d}-" + "-".join(f"{k}{v}" for k, v in sorted(setting.items()))
        if self.watcher:
            self.watcher.trial_started(index, role, setting)
        started = time.time()
        run = self.run_trial(dict(setting), name, role)
        rec = TrialRecord(index=index, role=role, setting=dict(setting), result=run.path,
                          started=started, wall_s=run.wall)
        scored, runs = Scored(), []
        if run.error is not None:
            rec.status, rec.error, rec.error_message = "failed", run.error.kind, str(run.error)
        elif run.result is not None:
            scored = score(run.result, self.opts.slo, levels=run.levels)
            runs = [scored.data] if scored.data is not None else []
            rec.status = "partial" if run.result.partial else "ok"
            if scored.data is None or not any(r.ok for r in scored.data.records):
                rec.status, rec.error, rec.error_message = "failed", *_no_answer(run.result)
            rec.level, rec.objective, rec.low, rec.high = (
                scored.level, scored.value, scored.low, scored.high)
            rec.slo_met, rec.slo_margin = scored.slo_met, scored.margin
            rec.ttft_p99, rec.tpot_p99 = scored.ttft_p99, scored.tpot_p99
            if run.result.recommendation is not None:
                rec.verdict = run.result.recommendation.verdict
                rec.advice = run.result.recommendation.text
        if self._baseline is not None and runs:
            rec.vs_baseline = self._call(self._baseline.runs, runs)
        self.result.trials.append(rec)
        if self.watcher:
            self.watcher.trial_done(rec, self.result.objective)
        if rec.status == "partial":
            self.result.stopped = "interrupted"
            raise StopSearch
        return _Measured(rec, scored, runs, run.result)

    def _call(self, a: list[LevelData], b: list[LevelData]) -> MetricCall:
        return compare_metric(a, b, objective_metric(self.opts.slo), delta=self.delta,
                              slo=self.opts.slo)

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
        assert self.plan is not None
        return {**self.opts.baseline, self.plan.knob: self.plan.values[i]}

    def _measure(self, i: int) -> _Measured:
        if i not in self._by_index:
            self._check_budget(2)  # this trial and the winner's re-run
            self._by_index[i] = self._trial(self._setting(i), self.opts.search)
        return self._by_index[i]

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

    # -- the run ----------------------------------------------------------------------------
    def run(self) -> TuneResult:
        """Every step; Ctrl-C or the budget stops it with what is done so far."""
        for step in (self._run, self._choose_and_rerun):
            try:
                step()
            except StopSearch:
                pass
            except KeyboardInterrupt:
                self.result.stopped = "interrupted"
        self.result.partial = self.result.stopped in ("budget", "interrupted")
        self.result.wall_s = self.clock() - self.t0
        summarize(self.result, self.delta)
        return self.result

    def _run(self) -> None:
        base = self._trial(self.opts.baseline, "baseline")
        if base.trial.status != "ok":
            self.result.stopped = "baseline failed"
            return
        aa = self._trial(self.opts.baseline, "a/a")
        spread = DEFAULT_DELTA
        if aa.trial.status == "ok":
            spread = noise_floor(compare_metric(
                base.runs, aa.runs, objective_metric(self.opts.slo), slo=self.opts.slo))
            self.result.noise_basis = "the A/A pair of the baseline"
            if spread > MAX_NOISE:
                self.result.stopped = "too noisy"
                reach = "without bound" if math.isinf(spread) else f"by up to {spread:.0%}"
                self.result.notes.append(
                    f"the two baseline runs differ {reach}: a setting would have to beat that "
                    "to count, so no change can be shown; give each trial more time "
                    "(--duration) or run where nothing else competes for the machine")
                if self.opts.search != "grid":
                    self.result.noise_floor = None if math.isinf(spread) else spread
                    return
                # A grid still measures every value (the table is the reference), but
                # recommends none.
            self.delta = spread if math.isfinite(spread) else 1.0
        else:
            self.result.noise_basis = f"{DEFAULT_DELTA:.0%} (the A/A run failed)"
        self.result.noise_floor = self.delta if math.isfinite(spread) else None
        pooled = _Measured(base.trial, base.scored, base.runs + aa.runs, base.result)
        self._baseline = pooled
        aa.trial.vs_baseline = self._call(base.runs, aa.runs)
        assert base.result is not None
        rec, curve = base.result.recommendation, base.result.capacity_curve
        plan = plan_search(rec, curve, self.opts.baseline, self.opts.knobs,
                           knob=self.opts.knob, values=self.opts.values)
        if isinstance(plan, str) and (self.opts.search == "grid" or self.opts.values):
            # The user asked for these values: try them, whatever the diagnosis says.
            self.result.notes.append(plan)
            plan = plan_search(rec, curve, self.opts.baseline, self.opts.knobs,
                               knob=next(iter(self.opts.knobs)), values=self.opts.values)
        if isinstance(plan, str):
            self.result.stopped = "nothing to tune"
            self.result.notes.append(plan)
            return
        self._plan(plan)
        self._by_index[plan.start] = pooled
        n = len(plan.values)
        if self.watcher:
            self.watcher.planned(len(self.result.trials) + planned_trials(n, self.opts.search) - 1)
        if self.opts.search == "grid":
            grid(n, self._value, order=[plan.start])
        else:
            guided(n, plan.start, plan.guide, self._value, self._compare,
                   prefer_low=plan.prefer_low)

    def _plan(self, plan: SearchPlan) -> None:
        self.plan = plan
        r = self.result
        r.knob, r.direction, r.values = plan.knob, plan.direction, list(plan.values)
        r.guide = {"reason": plan.reason, "target": plan.target,
                   "first": plan.values[plan.guide]}

    def _choose_and_rerun(self) -> None:
        """The cheapest setting as good as the best (SLO met first), and its re-run,
        unless the run was stopped (then what was measured stands)."""
        plan = self.plan
        if plan is None or self.result.stopped == "too noisy":
            return
        measured = list(self._by_index)

        def met_value(i: int) -> float | None:
            m = self._by_index[i]
            ok = m.trial.status == "ok" and (not self.opts.slo or m.scored.slo_met)
            return m.scored.value if ok else None

        # Cheaper counts as good as the best within the noise, but never more than 5%
        # below it (the knee of section 5), however noisy the run.
        chosen = choose(measured, met_value, self._compare, floor=min(self.delta, DEFAULT_DELTA),
                        prefer_low=plan.prefer_low)
        if chosen is None:
            return
        winner = self._by_index[chosen]
        self.result.chosen = dict(winner.trial.setting)
        self.result.chosen_trial = winner.trial.index
        if chosen == plan.start or self.result.stopped != "done":
            return
        self._check_budget(1)
        again = self._trial(winner.trial.setting, "rerun")
        if again.trial.status == "ok" and self._baseline is not None:
            self.result.before_after = compare(
                self._baseline.runs, again.runs, delta=self.delta, slo=self.opts.slo)
            self.result.chosen_trial = again.trial.index

