"""``tune --ray``'s session (``tune.parallel``) with a fake batch runner: the rounds,
each node's own A/A floor, the grid shared by the free slots, the same choice as the
serial session."""

from __future__ import annotations

from collections import Counter

from test_tune_session import RAISE, Server, opts

from infersight.tune import ParallelTuneSession, TrialRun, TrialSpec, TuneSession


class Batches:
    """``run_batch``: each trial on its pinned slot, else round-robin, as the slots
    would take them; records the batches."""

    def __init__(self, server: Server, slots: list[str]) -> None:
        self.server, self.slots = server, slots
        self.batches: list[list[TrialSpec]] = []

    def __call__(self, specs: list[TrialSpec]) -> list[TrialRun]:
        self.batches.append(specs)
        out, free = [], 0
        for s in specs:
            slot = s.slot
            if slot is None:
                slot, free = free % len(self.slots), free + 1
            run = self.server(s.setting, s.name, s.role)
            run.node = self.slots[slot]
            out.append(run)
        return out


NODES = [
    {"node_id": "n1", "comparable": "cpu=8,gpu=0"},
    {"node_id": "n2", "comparable": "cpu=8,gpu=0"},
]


def test_the_grid_in_rounds_over_two_nodes_agrees_with_the_serial_grid() -> None:
    values = [1, 2, 4, 6, 8, 12]
    batches = Batches(Server(), ["n1", "n2"])
    result = ParallelTuneSession(
        opts(search="grid", values=values), batches, ["n1", "n2"], nodes=NODES
    ).run()
    serial = TuneSession(opts(search="grid", values=values), Server()).run()
    assert result.chosen == serial.chosen == {"slots": 6}
    # Round 1: the baseline on slot 0, node n2's A/A pair pinned to it.
    first = batches.batches[0]
    assert [(s.role, s.slot) for s in first] == [
        ("baseline", 0),
        ("node baseline", 1),
        ("node a/a", 1),
    ]
    # Round 2: slot 0's A/A run, and the other values, on whichever slot is free.
    second = batches.batches[1]
    assert (second[0].role, second[0].slot) == ("a/a", 0)
    assert sorted(s.setting["slots"] for s in second[1:]) == [1, 4, 6, 8, 12]
    assert all(s.slot is None for s in second[1:])
    # Each node its own floor; the session's is the widest.
    floors = {n["node_id"]: n["noise_floor"] for n in result.nodes}
    assert set(floors) == {"n1", "n2"} and all(f is not None for f in floors.values())
    assert result.noise_floor == max(f for f in floors.values() if f is not None)
    assert all(t.node in ("n1", "n2") for t in result.trials)
    count = Counter(t.node for t in result.trials)
    assert {n["node_id"]: n["trials"] for n in result.nodes} == dict(count)
    assert result.trials[-1].role == "rerun" and result.confirmed_by == result.trials[-1].index
    assert "the widest of 2 nodes' own A/A floors" in result.noise_basis


def test_the_guided_search_falls_back_to_the_grid_and_says_so() -> None:
    result = ParallelTuneSession(
        opts(values=[1, 2, 4, 6, 8]), Batches(Server(), ["n1"]), ["n1"], nodes=NODES[:1]
    ).run()
    assert any("with --ray the guided search measures the grid's values" in n for n in result.notes)
    assert sorted({t.setting["slots"] for t in result.trials}) == [1, 2, 4, 6, 8]
    assert result.chosen == {"slots": 6}


def test_a_failed_baseline_ends_the_parallel_run() -> None:
    server = Server(fail_from=1, rec=RAISE)
    result = ParallelTuneSession(opts(), Batches(server, ["n1", "n2"]), ["n1", "n2"]).run()
    assert result.stopped == "baseline failed" and result.chosen is None
