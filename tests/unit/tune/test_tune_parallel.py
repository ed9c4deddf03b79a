"""``tune --ray``'s session (``tune.parallel``) on slots simulated in time: no rounds
(a free slot takes the next trial at once), each node's own A/A floor, the choice
confirmed while the last values still run, the same choice as the serial session."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

import pytest
from test_tune_confirm import SLO, Regressing
from test_tune_session import RAISE, Server, opts
from tune_synth import server_run

from infersight.tune import (
    NextTrial,
    ParallelTuneSession,
    TrialDone,
    TrialRun,
    TrialSpec,
    TuneSession,
)

#: A trial's time on its slot; the baseline runs the diagnosis's extra level too.
COST = {"baseline": 1.8}


class Pool:
    """``run_trials`` as the Ray slots run them, in simulated time: each free slot asks
    for its trial, a trial takes ``COST`` (else 1) on its slot, the first to end is
    handed back first. Keeps (start, end, node, spec) of every trial."""

    def __init__(self, server: Server, slots: list[str]) -> None:
        self.server, self.slots = server, slots
        self.now = 0.0
        self.ran: list[tuple[float, float, str, TrialSpec]] = []

    def __call__(self, next_trial: NextTrial, done: TrialDone) -> None:
        idle = list(range(len(self.slots)))
        busy: list[tuple[float, int, TrialSpec, float]] = []
        while True:
            for slot in list(idle):
                spec = next_trial(slot)
                if spec is not None:
                    idle.remove(slot)
                    busy.append((self.now + COST.get(spec.role, 1.0), slot, spec, self.now))
            if not busy:
                return
            busy.sort(key=lambda b: (b[0], b[1]))
            end, slot, spec, start = busy.pop(0)
            self.now = end
            run = self.server(spec.setting, spec.name, spec.role)
            run.node, run.started, run.wall = self.slots[slot], start, end - start
            self.ran.append((start, end, self.slots[slot], spec))
            idle = sorted([*idle, slot])
            done(spec, run)

    def started(self, role: str, slots: int | None = None) -> list[tuple[float, float, str]]:
        return [
            (a, b, node)
            for a, b, node, s in self.ran
            if s.role == role and (slots is None or s.setting["slots"] == slots)
        ]


NODES = [
    {"node_id": "n1", "comparable": "cpu=8,gpu=0"},
    {"node_id": "n2", "comparable": "cpu=8,gpu=0"},
]


def run(values: list[int], server: Server, **kw: object) -> tuple[Pool, ParallelTuneSession]:
    pool = Pool(server, ["n1", "n2"])
    session = ParallelTuneSession(
        opts(search="grid", values=values, **kw),
        pool,
        ["n1", "n2"],
        nodes=NODES,
        clock=lambda: pool.now,
    )
    session.run()
    return pool, session


def test_two_nodes_share_the_grid_without_rounds_and_agree_with_the_serial_grid() -> None:
    values = [1, 2, 4, 6, 8, 12]
    pool, session = run(values, Server())
    result = session.result
    serial = TuneSession(opts(search="grid", values=values), Server()).run()
    assert result.chosen == serial.chosen == {"slots": 6}
    # The baseline on n1 and n2's own A/A pair, side by side from the start.
    assert pool.started("baseline") == [(0.0, 1.8, "n1")]
    assert pool.started("node baseline") == [(0.0, 1.0, "n2")]
    assert pool.started("node a/a") == [(1.0, 2.0, "n2")]
    assert pool.started("a/a") == [(1.8, 2.8, "n1")]
    # No barrier: n2 took a value as soon as its pair was in, while n1's A/A run ran,
    # and every slot took the next value the moment it was free.
    grid = pool.started("grid")
    assert sorted(a for a, _, _ in grid) == [2.0, 2.8, 3.0, 3.8, 4.0]
    # The choice's rerun started on the slot the values had left, before the last
    # value ended; the values left the choice as it was, so it is the confirmation.
    (rerun,) = pool.started("rerun", 6)
    assert rerun[0] == 4.8 and rerun[0] < max(b for _, b, _ in grid)
    last = result.trial(result.confirmed_by)
    assert last is not None and last.role == "rerun" and last.confirmed
    # 10 trials, 10.8 of slot time (the baseline 1.8, the others 1), on two slots: 5.8.
    assert result.wall_s == pytest.approx(5.8)
    # Each node its own floor; the session's is the widest.
    floors = {n["node_id"]: n["noise_floor"] for n in result.nodes}
    assert set(floors) == {"n1", "n2"} and all(f is not None for f in floors.values())
    assert result.noise_floor == max(f for f in floors.values() if f is not None)
    assert "the widest of 2 nodes' own A/A floors" in result.noise_basis
    count = Counter(t.node for t in result.trials)
    assert {n["node_id"]: n["trials"] for n in result.nodes} == dict(count)
    # The trials in the order they started, every one called against the baseline.
    assert [t.index for t in result.trials] == list(range(1, 11))
    assert all(t.vs_baseline is not None for t in result.trials[1:])


def test_a_choice_the_last_value_changes_is_rerun_again() -> None:
    # Slots 6 (the knee) is the last value to start: the rerun of the choice of the
    # moment (4) started before it ended, and 6 then got a rerun of its own.
    pool, session = run([1, 2, 3, 4, 6], Server())
    result = session.result
    assert result.chosen == {"slots": 6}
    early = pool.started("rerun", 4)
    assert len(early) == 1 and early[0][0] < pool.started("grid", 6)[0][1]
    confirmation = result.trial(result.confirmed_by)
    assert confirmation is not None and confirmation.setting == {"slots": 6}
    four = next(t for t in result.trials if t.role == "rerun" and t.setting == {"slots": 4})
    assert four.confirms is None  # it confirms nothing: the choice moved on
    assert any("reran the choice of the moment" in n for n in result.notes)


def test_a_refuted_choice_gives_way_to_the_next_best_as_in_the_serial_session() -> None:
    values = [1, 2, 4, 6, 8]
    _, session = run(values, Regressing({6}), slo=SLO)
    result = session.result
    serial = TuneSession(opts(search="grid", values=values, slo=SLO), Regressing({6})).run()
    assert result.chosen == serial.chosen and result.chosen not in (None, {"slots": 6})
    refuted = [t for t in result.trials if t.confirmed is False]
    assert [t.setting for t in refuted] == [{"slots": 6}]
    confirmation = result.trial(result.confirmed_by)
    assert confirmation is not None and confirmation.confirmed and confirmation.slo_met
    assert any("slots 6" in n and "was refuted" in n for n in result.notes)


def test_a_node_too_noisy_recommends_nothing() -> None:
    class Drifting(Server):
        def __call__(self, setting: Mapping[str, int], name: str, role: str) -> TrialRun:
            run = super().__call__(setting, name, role)
            if role == "node a/a":  # n2's second baseline run, 40% slower
                run.result = server_run(
                    setting["slots"], ttft=0.07, itl=0.014, recommendation=RAISE
                )
            return run

    pool, session = run([1, 2, 4], Drifting())
    result = session.result
    assert result.stopped == "too noisy" and result.chosen is None
    assert not pool.started("rerun")
    assert {t.setting["slots"] for t in result.trials} == {1, 2, 4}


def test_the_guided_search_falls_back_to_the_grid_and_says_so() -> None:
    pool = Pool(Server(), ["n1"])
    result = ParallelTuneSession(
        opts(values=[1, 2, 4, 6, 8]), pool, ["n1"], nodes=NODES[:1], clock=lambda: pool.now
    ).run()
    assert any("with --ray the guided search measures the grid's values" in n for n in result.notes)
    assert sorted({t.setting["slots"] for t in result.trials}) == [1, 2, 4, 6, 8]
    assert result.chosen == {"slots": 6}


def test_a_failed_baseline_ends_the_parallel_run() -> None:
    server = Server(fail_from=1, rec=RAISE)
    result = ParallelTuneSession(opts(), Pool(server, ["n1", "n2"]), ["n1", "n2"]).run()
    assert result.stopped == "baseline failed" and result.chosen is None
