"""``tune --ray``: the trials in batches over worker slots (a Ray node each, or a share
of a node's GPUs), each node with its own A/A noise floor (docs/design.md section 8).

The session still decides and never starts anything: it is given ``run_batch``, which
runs a list of :class:`~infersight.tune.trial.TrialSpec` on the slots (a pinned trial
on its own slot, the others on whichever slot is free first) and returns their runs in
order. The rounds:

1. the baseline on slot 0, with the extra level its diagnosis needs, and on every
   other node the baseline twice: that node's A/A pair;
2. slot 0's A/A run, and every other value of the plan. The grid maps directly; the
   guided search falls back to the grid's values (the model's proposals and the
   bisection are sequential: each needs the trial before it), which the slots share;
3. the choice and its confirmation run, as in the serial session.

The caller gives only comparable nodes (same CPUs, GPU count and model), so any two
trials may be compared; the floor every comparison uses is the widest of the nodes'
own A/A floors, each kept in ``TuneResult.nodes``.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from infersight.core.tune_result import TuneResult
from infersight.tune.objective import aa_floor
from infersight.tune.search import StopSearch
from infersight.tune.session import TuneSession
from infersight.tune.trial import Measured, TrialRun, TrialSpec, TuneOptions, TuneWatcher

__all__ = ["ParallelTuneSession", "RunBatch"]

RunBatch = Callable[[list[TrialSpec]], list[TrialRun]]


class ParallelTuneSession(TuneSession):
    """A TuneSession whose trials run ``len(slots)`` at a time."""

    def __init__(
        self,
        opts: TuneOptions,
        run_batch: RunBatch,
        slots: Sequence[str],
        *,
        nodes: Sequence[Mapping[str, Any]] = (),
        watcher: TuneWatcher | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        def one(setting: Mapping[str, int], name: str, role: str) -> TrialRun:
            return run_batch([TrialSpec(dict(setting), name, role)])[0]

        super().__init__(opts, one, watcher=watcher, clock=clock)
        if not slots:
            raise ValueError("a parallel session needs at least one slot")
        self.run_batch = run_batch
        #: The node id of each slot.
        self.slots = list(slots)
        self.result.nodes = [dict(n) for n in nodes]

    def run(self) -> TuneResult:
        result = super().run()
        count = Counter(t.node for t in result.trials)
        for n in result.nodes:
            n["trials"] = count.get(n.get("node_id"), 0)
        return result

    def _batch(self, specs: list[tuple[Mapping[str, int], str, int | None]]) -> list[Measured]:
        """Run ``(setting, role, slot)`` trials together; record them in order."""
        first = len(self.result.trials) + 1
        todo = []
        for k, (setting, role, slot) in enumerate(specs):
            if self.watcher:
                self.watcher.trial_started(first + k, role, setting)
            todo.append(TrialSpec(dict(setting), self._name(first + k, setting), role, slot))
        started = time.time()
        runs = self.run_batch(todo)
        out = [
            self._record(first + k, s.setting, s.role, run, started)
            for k, (s, run) in enumerate(zip(todo, runs, strict=True))
        ]
        if any(m.trial.status == "partial" for m in out):
            self.result.stopped = "interrupted"
            raise StopSearch
        return out

    def _fit_budget(self, todo: list[int]) -> list[int]:
        """The values that fit in the budget, rounds of ``len(slots)`` trials, with the
        winner's re-run after them."""
        budget, per = self.opts.budget_s, self._trial_time()
        if budget is None:
            return todo
        n = len(self.slots)
        while todo and self.clock() - self.t0 + per * (math.ceil((len(todo) + 1) / n) + 1) > budget:
            todo = todo[:-1]
            self.result.stopped = "budget"
        return todo

    def _run(self) -> None:
        base_setting = self.opts.baseline
        first_slot: dict[str, int] = {}
        for i, node in enumerate(self.slots):
            first_slot.setdefault(node, i)
        others = [s for s in first_slot.values() if s != 0]
        specs: list[tuple[Mapping[str, int], str, int | None]] = [(base_setting, "baseline", 0)]
        for s in others:
            specs += [(base_setting, "node baseline", s), (base_setting, "node a/a", s)]
        got = self._batch(specs)
        base = got[0]
        if base.trial.status != "ok":
            self.result.stopped = "baseline failed"
            return
        plan = self._plan_from(base)
        if plan is None:
            return
        todo = [i for i in range(len(plan.values)) if i != plan.start]
        if self.opts.search != "grid":
            self.result.notes.append(
                "with --ray the guided search measures the grid's values, as many at once "
                "as there are workers (the model's proposals are sequential)"
            )
        todo = self._fit_budget(todo)
        if self.watcher:
            self.watcher.planned(len(self.result.trials) + len(todo) + 2)
        got2 = self._batch(
            [(base_setting, "a/a", 0), *((self._setting(i), "grid", None) for i in todo)]
        )
        aa = self._aa = got2[0]
        for i, m in zip(todo, got2[1:], strict=True):
            self._by_index[i] = m
        pairs = [(base, aa), *((got[1 + 2 * k], got[2 + 2 * k]) for k in range(len(others)))]
        if not self._set_noise(self._node_floors(pairs)):
            return
        same = [m for pair in pairs for m in pair if m.trial.status == "ok"]
        pooled = Measured(base.trial, base.scored, [r for m in same for r in m.runs], base.result)
        self._baseline = pooled
        for m in [*got[1:], *got2]:
            if m.runs:
                m.trial.vs_baseline = (
                    self._call(base.runs, m.runs) if m is aa else self._call(pooled.runs, m.runs)
                )
        self._by_index[plan.start] = pooled

    def _node_floors(self, pairs: list[tuple[Measured, Measured]]) -> tuple[float, str] | None:
        """Each node's A/A floor (kept in ``result.nodes``); the widest of them, which
        every comparison uses (None: no node's pair ran)."""
        by_id = {n.get("node_id"): n for n in self.result.nodes}
        floors: list[float] = []
        for b, a in pairs:
            node = by_id.setdefault(b.trial.node, {"node_id": b.trial.node})
            if b.trial.status != "ok" or a.trial.status != "ok":
                node["noise_floor"], node["noise_basis"] = None, "its A/A pair failed"
                continue
            spread, basis = aa_floor(b.scored, a.scored, self.opts.slo)
            node["noise_floor"] = spread if math.isfinite(spread) else None
            node["noise_basis"] = f"{basis} (trials {b.trial.index} and {a.trial.index})"
            floors.append(spread)
        self.result.nodes = list(by_id.values())
        if not floors:
            return None
        return max(floors), (
            f"the widest of {len(floors)} nodes' own A/A floors (each the "
            "A/A pair of the baseline on that node)"
        )
