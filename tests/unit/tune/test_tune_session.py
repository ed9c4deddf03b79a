"""The tune session on a server whose best setting is known (docs/design.md section 8):
the A/A noise floor, the diagnosis's space, the search, failures as trials, the budget,
Ctrl-C, and an SLO no setting meets."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tune_synth import server_run

from infersight.core.curve import Recommendation
from infersight.core.errors import LaunchError, OutOfMemory
from infersight.stats.significance import BETTER
from infersight.tune import TrialRun, TuneOptions, TuneSession

RAISE = Recommendation(
    verdict="slot_bound",
    knob="slots",
    direction="up",
    current=2,
    target=8,
    text="raise --parallel 2 -> 8",
)


class Server:
    """``run_trial`` for the session: a synthetic run per setting, or a failure."""

    def __init__(
        self,
        *,
        knee: int = 6,
        fail_from: int | None = None,
        interrupt_at: int | None = None,
        rec: Recommendation | None = RAISE,
        slo: Mapping[str, float] | None = None,
    ) -> None:
        self.knee, self.fail_from, self.interrupt_at = knee, fail_from, interrupt_at
        self.rec, self.slo = rec, slo
        self.calls: list[dict[str, int]] = []

    def __call__(self, setting: Mapping[str, int], name: str, role: str) -> TrialRun:
        self.calls.append(dict(setting))
        if self.interrupt_at is not None and len(self.calls) >= self.interrupt_at:
            raise KeyboardInterrupt
        slots = setting["slots"]
        if self.fail_from is not None and slots >= self.fail_from:
            err = (
                OutOfMemory("CUDA out of memory")
                if slots % 2
                else LaunchError(
                    "the server exited with status 1 before it was healthy", exit_code=1
                )
            )
            return TrialRun(error=err, wall=1.0)
        # As the entrypoint runs them: the baseline also with 4x its slots in flight.
        clients = [slots, 4 * slots] if role in ("baseline", "a/a") else [slots]
        run = server_run(
            slots,
            knee=self.knee,
            seed=len(self.calls),
            slo=self.slo,
            recommendation=self.rec,
            clients=clients,
        )
        return TrialRun(
            result=run, path=f"trials/{name}/result.json", wall=1.0, levels=[f"c={slots}"]
        )


def opts(**kw: Any) -> TuneOptions:
    base: dict[str, Any] = {"baseline": {"slots": 2}, "knobs": {"slots": (1, 64)}}
    return TuneOptions(**{**base, **kw})


def test_the_model_proposes_the_trials_and_finds_the_knee() -> None:
    result = TuneSession(opts(), Server()).run()
    assert [t.role for t in result.trials[:2]] == ["baseline", "a/a"]
    assert result.noise_floor is not None and 0.01 <= result.noise_floor < 0.05
    search = [t for t in result.trials if t.role == "guided"]
    # Every search trial was proposed by the model, its prediction beside its measurement.
    assert search and all(t.proposed and t.predicted is not None for t in search)
    assert search[0].proposed == "the model's predicted best"
    assert result.knob == "slots" and result.guide["first"] == search[0].setting["slots"]
    assert result.chosen == {"slots": 6}  # the knee: more slots buy no throughput
    last = result.trials[-1]
    assert last.role == "rerun" and last.setting == {"slots": 6} and last.confirms is not None
    assert last.confirmed and result.confirmed_by == last.index == result.chosen_trial
    assert result.verdict == BETTER and result.stopped == "done" and not result.partial
    assert (
        "slots 2 -> slots 6" in result.summary and "confirmed by a run of its own" in result.summary
    )
    assert any(
        "the model's search stopped: the predicted best (6) was measured" in n for n in result.notes
    )
    # One model, refitted on every trial that answered, each at its own slot limit.
    assert result.model is not None
    assert {lv.split("/")[0] for lv in result.model.levels} == {
        f"{t.index:02d}-slots{t.setting['slots']}" for t in result.trials
    }
    # Refitted on the trials so far, it predicted the rerun of the knee within 5%.
    assert last.predicted is not None and last.objective is not None
    assert abs(last.predicted / last.objective - 1) < 0.05
    searched = {t.setting["slots"] for t in result.trials}
    assert len(searched) <= len(result.values) // 3  # 3 of 16 here


def test_grid_measures_every_value_and_agrees() -> None:
    result = TuneSession(opts(search="grid", values=[1, 2, 4, 6, 8, 12]), Server()).run()
    assert sorted({t.setting["slots"] for t in result.trials}) == [1, 2, 4, 6, 8, 12]
    assert result.chosen == {"slots": 6}


def test_failed_settings_are_trials_with_typed_errors() -> None:
    result = TuneSession(opts(values=[1, 2, 4, 8, 12, 16]), Server(knee=20, fail_from=9)).run()
    failed = [t for t in result.trials if t.status == "failed"]
    assert failed and {t.error for t in failed} <= {"OutOfMemory", "LaunchError"}
    assert all(t.error_message for t in failed)
    assert result.chosen == {"slots": 8}  # the largest that started


def test_a_baseline_that_fails_ends_the_run_with_its_error() -> None:
    result = TuneSession(opts(), Server(fail_from=1)).run()
    assert result.stopped == "baseline failed" and len(result.trials) == 1
    assert "did not run" in result.summary and "exited" in result.summary


def test_the_budget_stops_the_search_and_keeps_the_trials() -> None:
    now = [0.0]

    class Clocked(Server):
        def __call__(self, setting: Mapping[str, int], name: str, role: str) -> TrialRun:
            now[0] += 60.0
            run = super().__call__(setting, name, role)
            run.wall = 60.0
            return run

    result = TuneSession(opts(budget_s=250.0), Clocked(), clock=lambda: now[0]).run()
    assert result.stopped == "budget" and result.partial
    assert 2 <= len(result.trials) <= 4 and now[0] <= 250.0
    assert "stopped early: budget" in result.summary


def test_ctrl_c_keeps_what_was_done() -> None:
    result = TuneSession(opts(), Server(interrupt_at=4)).run()
    assert result.stopped == "interrupted" and result.partial
    assert len(result.trials) == 3 and all(t.role != "rerun" for t in result.trials)
    assert result.chosen is not None


def test_an_slo_no_setting_meets_is_reported_with_the_closest() -> None:
    slo = {"tpot_p99": 0.005}  # 5 ms: every setting decodes at 10 ms or more
    result = TuneSession(opts(slo=slo, values=[1, 2, 4]), Server(slo=slo)).run()
    assert result.objective == "goodput" and result.slo_met is False
    assert result.chosen is None and result.closest_trial is not None
    assert "no setting met the SLO" in result.summary and "the closest is" in result.summary


def test_a_diagnosis_that_holds_leaves_nothing_to_tune() -> None:
    hold = Recommendation(verdict="healthy", knob=None, direction="hold", text="no change needed")
    result = TuneSession(opts(), Server(rec=hold)).run()
    assert result.stopped == "nothing to tune" and len(result.trials) == 2
    assert "no change needed" in result.summary
    forced = TuneSession(opts(knob="slots", values=[1, 2, 4]), Server(rec=hold)).run()
    assert forced.chosen == {"slots": 4}
    # Asked for a grid, tune tries it, and says what the diagnosis thought.
    grid = TuneSession(opts(search="grid", values=[1, 2, 4]), Server(rec=hold)).run()
    assert grid.stopped == "done" and grid.chosen == {"slots": 4}
    assert any("no change needed" in n for n in grid.notes)


def test_a_trial_whose_requests_all_failed_is_a_failed_trial_with_their_error() -> None:
    from infersight.core.records import RequestRecord, RunResult
    from infersight.stats.aggregate import aggregate

    class Refusing(Server):
        def __call__(self, setting: Mapping[str, int], name: str, role: str) -> TrialRun:
            if setting["slots"] < 4:
                return super().__call__(setting, name, role)
            recs = [
                RequestRecord(
                    f"r{i}",
                    scheduled=100.0 + i,
                    sent=100.0 + i,
                    end=100.1 + i,
                    status=503,
                    error="Overloaded",
                    labels={"level": "c=4"},
                )
                for i in range(10)
            ]
            run = RunResult(records=recs, aggregates={"c=4": aggregate(recs)})
            return TrialRun(result=run, path=f"trials/{name}/result.json", wall=1.0)

    result = TuneSession(opts(values=[1, 2, 4]), Refusing()).run()
    refused = next(t for t in result.trials if t.setting["slots"] == 4)
    assert refused.status == "failed" and refused.error == "Overloaded"
    assert "10 x Overloaded" in (refused.error_message or "")


def test_a_baseline_too_noisy_to_tell_settings_apart_recommends_nothing() -> None:
    class Drifting(Server):
        def __call__(self, setting: Mapping[str, int], name: str, role: str) -> TrialRun:
            run = super().__call__(setting, name, role)
            if role == "a/a":  # the same setting, 40% slower the second time
                run.result = server_run(
                    setting["slots"], ttft=0.07, itl=0.014, recommendation=RAISE
                )
            return run

    result = TuneSession(opts(), Drifting()).run()
    assert result.stopped == "too noisy" and len(result.trials) == 2 and result.chosen is None
    assert result.noise_floor is not None and result.noise_floor > 0.25
    assert "too noisy" in result.summary and "--duration" in result.summary
    # A grid still measures every value, the reference table, and advises none.
    grid = TuneSession(opts(search="grid", values=[1, 2, 4]), Drifting()).run()
    assert grid.stopped == "too noisy" and grid.chosen is None and not grid.before_after
    assert {t.setting["slots"] for t in grid.trials} == {1, 2, 4}


def test_a_failed_a_a_run_leaves_the_default_noise_floor() -> None:
    class NoRepeat(Server):
        def __call__(self, setting: Mapping[str, int], name: str, role: str) -> TrialRun:
            if role == "a/a":
                return TrialRun(error=LaunchError("exited", exit_code=1), wall=1.0)
            return super().__call__(setting, name, role)

    result = TuneSession(opts(values=[1, 2, 4, 6, 8]), NoRepeat()).run()
    assert result.noise_floor == 0.05 and "the A/A run failed" in result.noise_basis
    assert result.chosen == {"slots": 6} and result.stopped == "done"
