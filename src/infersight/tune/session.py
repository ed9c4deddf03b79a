"""One ``tune`` run (docs/design.md section 8): baseline, A/A pair, the diagnosis's
search space, the search (the model's proposals over slots), the choice confirmed by a run of
its own, and the before/after with its call.

The session never starts a server or a benchmark itself: it is given ``run_trial``
(setting, name, role), which measures one setting and returns its RunResult (or the
typed error that stopped it). So the same session drives the embedded engine, a
launched server and the
gateway's limits, and the tests drive it with fakes.
"""

from __future__ import annotations

import math
from functools import partial

from infersight.core.tune_result import ModelPoint, TuneResult
from infersight.stats.significance import DEFAULT_DELTA, compare
from infersight.tune.book import TrialBook
from infersight.tune.knobs import SearchSpace, search_space
from infersight.tune.objective import aa_floor
from infersight.tune.propose import Guess, model_search
from infersight.tune.search import StopSearch, choose, grid, guided, planned_trials
from infersight.tune.summary import setting_text, summarize
from infersight.tune.trial import Measured

__all__ = ["TuneSession"]

#: Past this A/A spread no setting can be shown better: tune says so instead of guessing.
MAX_NOISE = 0.25


class TuneSession(TrialBook):
    """Runs the trials and fills a TuneResult (partial when stopped)."""

    # -- the run ----------------------------------------------------------------------------
    def run(self) -> TuneResult:
        """Every step; Ctrl-C or the budget stops it with what is done so far."""
        for step in (self._run, self._choose_and_confirm, self._model_curve):
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
        self._aa = aa
        ok = aa.trial.status == "ok"
        if not self._set_noise(aa_floor(base.scored, aa.scored, self.opts.slo) if ok else None):
            return
        pooled = Measured(base.trial, base.scored, base.runs + aa.runs, base.result)
        self._baseline = pooled
        aa.trial.vs_baseline = self._call(base.runs, aa.runs)
        space = self._space_from(base)
        if space is None:
            return
        self._by_index[space.start] = pooled
        n = len(space.values)
        if self.watcher:
            self.watcher.planned(len(self.result.trials) + planned_trials(n, self.opts.search) - 1)
        if self.opts.search == "grid":
            grid(n, self._value, order=[space.start])
            return
        if self._uses_model:
            why = self._model_search(space)
            if why is not None:
                self.result.notes.append(f"the model's search stopped: {why}")
                return
            self.result.notes.append(
                f"the model could not be fitted ({self.model.why_not}): "
                "the guided bisection searched instead"
            )
        else:
            self.result.notes.append(
                f"the model cannot vary {space.knob}: the guided bisection "
                "from the diagnosis searched it"
            )
        guided(n, space.start, space.guide, self._value, self._compare, prefer_low=space.prefer_low)

    def _set_noise(self, floor: tuple[float, str] | None) -> bool:
        """The noise floor from the A/A spread and its basis (None: the A/A run failed);
        False when no search follows (too noisy; a grid still measures every value)."""
        spread = DEFAULT_DELTA
        if floor is not None:
            spread, self.result.noise_basis = floor
            if spread > MAX_NOISE:
                self.result.stopped = "too noisy"
                reach = "without bound" if math.isinf(spread) else f"by up to {spread:.0%}"
                self.result.notes.append(
                    f"the two baseline runs differ {reach}: a setting would have to beat that "
                    "to count, so no change can be shown; give each trial more time "
                    "(--duration) or run where nothing else competes for the machine"
                )
                if self.opts.search != "grid":
                    self.result.noise_floor = None if math.isinf(spread) else spread
                    return False
                # A grid still measures every value (the table is the reference), but
                # recommends none.
            self.delta = spread if math.isfinite(spread) else 1.0
        else:
            self.result.noise_basis = f"{DEFAULT_DELTA:.0%} (the A/A run failed)"
        self.result.noise_floor = self.delta if math.isfinite(spread) else None
        return True

    def _space_from(self, base: Measured) -> SearchSpace | None:
        """The search space from the baseline's diagnosis (None: nothing to tune)."""
        assert base.result is not None
        o, r = self.opts, base.result
        space_for = partial(
            search_space, r.recommendation, r.capacity_curve, o.baseline, o.knobs, values=o.values
        )
        space = space_for(knob=o.knob)
        if isinstance(space, str) and (o.search == "grid" or o.values):
            # The user asked for these values: try them, whatever the diagnosis says.
            self.result.notes.append(space)
            space = space_for(knob=next(iter(o.knobs)))
        if isinstance(space, str):
            self.result.stopped = "nothing to tune"
            self.result.notes.append(space)
            return None
        self._set_space(space)
        self._uses_model = space.knob == "slots"
        return space

    def _model_search(self, space: SearchSpace) -> str | None:
        """The model's proposals (``tune.propose``); None when it cannot be fitted."""

        def measure(i: int, guess: Guess | None, why: str) -> None:
            if not any(t.proposed for t in self.result.trials):
                self.result.guide["first"] = space.values[i]
            self._measure(i, guess, why)

        return model_search(
            space.values,
            lambda: {i: self._outcome(m) for i, m in self._by_index.items()},
            lambda: self.model.guesses(space.values),
            measure,
            slo=bool(self.opts.slo),
            delta=self.delta,
            floor=DEFAULT_DELTA,
            prefer_low=space.prefer_low,
        )

    def _model_curve(self) -> None:
        """The model fitted on every trial, and its objective at each value."""
        if (
            self.space is None
            or not self._uses_model
            or self.result.stopped == "interrupted"
            or self.model.model() is None
        ):
            return
        self.result.model = self.model.model()
        self.result.model_curve = [
            ModelPoint(value=v, objective=g.value if g else None, slo_met=g.slo_met if g else None)
            for v in self.space.values
            for g in [self.model.guess(v)]
        ]

    def _set_space(self, space: SearchSpace) -> None:
        self.space = space
        r = self.result
        r.knob, r.direction, r.values = space.knob, space.direction, list(space.values)
        r.guide = {
            "reason": space.reason,
            "target": space.target,
            "first": space.values[space.guide],
        }

    def _confirmation(self, i: int, winner: Measured) -> Measured | None:
        """The run that confirms setting ``i``: the A/A run for the baseline, else a rerun
        (None when the run stopped before it)."""
        assert self.space is not None
        if i == self.space.start and self._aa is not None and self._aa.trial.status == "ok":
            self._judge(winner, self._aa.trial, self._aa.scored)
            return self._aa
        if self.result.stopped != "done":
            return None
        self._check_budget(1)
        return self._trial(winner.trial.setting, "rerun", guess=self._guess(i), confirms=winner)

    def _pick(self, refuted: set[int]) -> int | None:
        """The choice among the measured settings but ``refuted`` (None: none ran)."""
        assert self.space is not None

        def met_value(i: int) -> float | None:
            m = self._by_index[i]
            ok = m.trial.status == "ok" and (not self.opts.slo or m.scored.slo_met)
            return m.scored.value if ok else None

        # Cheaper counts as good as the best within 5% (the knee of section 5), however
        # quiet the run: a gain below that buys too little to be advice.
        return choose(
            [i for i in self._by_index if i not in refuted],
            met_value,
            floor=DEFAULT_DELTA,
            prefer_low=self.space.prefer_low,
        )

    def _choose_and_confirm(self) -> None:
        """The cheapest setting within 5% of the best (SLO met first), confirmed by a run
        of its own; a refuted choice gives way to the next best. A stopped run keeps
        its unconfirmed choice (and says so)."""
        space = self.space
        if space is None or self.result.stopped == "too noisy":
            return
        refuted: set[int] = set()
        while True:
            chosen = self._pick(refuted)
            self.result.chosen = self.result.chosen_trial = None
            if chosen is None:
                return
            winner = self._by_index[chosen]
            self.result.chosen = dict(winner.trial.setting)
            self.result.chosen_trial = winner.trial.index
            again = self._confirmation(chosen, winner)
            if again is None:
                return
            if again.trial.confirmed:
                self.result.confirmed_by = again.trial.index
                if again is not self._aa and self._baseline is not None and again.runs:
                    self.result.before_after = compare(
                        self._baseline.runs, again.runs, delta=self.delta, slo=self.opts.slo
                    )
                    self.result.chosen_trial = again.trial.index
                return
            refuted.add(chosen)
            self.result.notes.append(
                f"{setting_text(winner.trial.setting, space.knob)} (trial {winner.trial.index}) "
                f"was refuted: {self._judge(winner, again.trial, again.scored)} (trial "
                f"{again.trial.index}); the next best was confirmed instead"
            )
