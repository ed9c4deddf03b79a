"""The choice confirmed by a run of its own (docs/design.md section 8): a refuted choice
is never reported, ``slo_met`` is the confirmation's, and a baseline with no goodput is
said in words. Every run comes from the server model's simulation (tune_synth)."""

from __future__ import annotations

from collections.abc import Mapping

from test_tune_session import RAISE, Server, opts
from tune_synth import server_run

from infersight.core.curve import Recommendation
from infersight.core.tune_result import TuneResult
from infersight.tune import TrialRun, TuneSession

SLO = {"tpot_p99": 0.025}
#: Tighter than a step past the knee, even in a closed loop's last, emptier steps.
TIGHT = {"tpot_p99": 0.012}


class Regressing(Server):
    """Its reruns of ``bad`` settings decode three times slower: the SLO is missed."""

    def __init__(
        self,
        bad: set[int] | None,
        *,
        knee: int = 6,
        rec: Recommendation | None = RAISE,
        slo: Mapping[str, float] = SLO,
    ) -> None:
        super().__init__(knee=knee, rec=rec, slo=slo)
        self.bad = bad

    def __call__(self, setting: Mapping[str, int], name: str, role: str) -> TrialRun:
        run = super().__call__(setting, name, role)
        s = setting["slots"]
        if role == "rerun" and (self.bad is None or s in self.bad):
            run.result = server_run(
                s, itl=0.03, seed=len(self.calls), slo=self.slo, recommendation=self.rec
            )
        return run


def confirmed(result: TuneResult) -> None:
    """What every result must show: the choice is the setting its confirmation met."""
    conf = result.trial(result.confirmed_by)
    assert conf is not None and conf.confirmed and conf.slo_met
    assert conf.setting == result.chosen and result.slo_met is True
    assert "the SLO was met by the chosen setting's confirmation run" in result.summary


def test_a_refuted_choice_gives_way_to_the_next_best() -> None:
    result = TuneSession(opts(slo=SLO), Regressing({6})).run()
    refuted = [t for t in result.trials if t.confirmed is False]
    assert [t.setting for t in refuted] == [{"slots": 6}] and refuted[0].role_text().startswith(
        "refutes"
    )
    assert result.chosen is not None and result.chosen != {"slots": 6}
    confirmed(result)
    assert any(
        "slots 6" in n and "was refuted: its confirmation run missed the SLO" in n
        for n in result.notes
    )


def test_when_every_rerun_is_refuted_the_baseline_its_a_a_run_confirmed_stays() -> None:
    result = TuneSession(opts(slo=SLO), Regressing(None)).run()
    assert (
        result.chosen == {"slots": 2}
        and len([t for t in result.trials if t.confirmed is False]) >= 1
    )
    assert result.trial(result.confirmed_by).role == "a/a"  # type: ignore[union-attr]
    confirmed(result)
    assert result.summary.startswith("keep slots 2") and "(the A/A run, trial 2)" in result.summary
    assert not result.before_after


def test_a_baseline_with_no_goodput_is_said_in_words() -> None:
    # 16 slots past a knee of 4: every step is 4 times slower, no request meets the SLO.
    server = Server(knee=4, rec=None, slo=TIGHT)
    result = TuneSession(
        opts(baseline={"slots": 16}, slo=TIGHT, values=list(range(1, 33))), server
    ).run()
    base = result.trial(1)
    assert base is not None and base.objective == 0 and base.slo_met is False
    assert result.chosen == {"slots": 4}
    confirmed(result)
    assert "none of the baseline's requests met the SLO" in result.summary
    assert "x-" not in result.summary and " -> " not in result.summary.split(":")[1]


def test_a_baseline_that_misses_the_slo_takes_its_noise_floor_from_throughput() -> None:
    # A few lucky requests give the baseline a little goodput, different in each run.
    result = TuneSession(
        opts(baseline={"slots": 16}, slo=SLO, values=[1, 2, 4, 8, 16]),
        Server(knee=4, rec=None, slo=SLO),
    ).run()
    assert result.stopped == "done" and result.noise_floor is not None
    assert "on throughput" in result.noise_basis
    # The model said 4 slots fell a little short of 8; within its error, 4 was tried.
    assert result.chosen == {"slots": 4}
    confirmed(result)
    assert (
        "where the baseline missed the SLO" in result.summary
        and "[unbounded]" not in result.summary
    )


def test_no_confirmed_setting_is_no_choice_and_the_slo_not_met() -> None:
    server = Regressing(None, knee=4, rec=None, slo=TIGHT)
    result = TuneSession(
        opts(baseline={"slots": 16}, slo=TIGHT, values=[1, 2, 4, 8, 16]), server
    ).run()
    assert result.chosen is None and result.confirmed_by is None and result.slo_met is False
    refuted = {t.setting["slots"] for t in result.trials if t.confirmed is False}
    assert refuted and not result.before_after
    assert (
        "in its confirmation run" in result.summary and "met it once, not again" in result.summary
    )


def test_a_measured_slo_of_any_trial_is_not_the_answer() -> None:
    # Trial 1 met the SLO (a lone, lucky run would have said "met"); tune says only
    # what the chosen setting's confirmation run did.
    result = TuneSession(opts(slo=SLO), Regressing({6})).run()
    assert any(t.slo_met for t in result.trials if t.role != "rerun")
    assert result.slo_met == result.trial(result.confirmed_by).slo_met  # type: ignore[union-attr]
