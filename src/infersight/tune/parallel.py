"""``tune --ray``: the trials over worker slots (a Ray node each, or a share of a node's
GPUs), each node with its own A/A noise floor (docs/design.md section 8).

The session still decides and never starts anything: it is given ``run_trials``, which
keeps the slots busy. Whenever a slot is free it asks the session for that slot's next
trial (``next_trial(slot)``; None: nothing for it now), runs it there, and hands each
finished run back (``done``); it returns when nothing runs and no free slot gets a
trial. There are no rounds: a slot that finishes takes the next trial at once, so no
node waits for another's trial to end. A free slot gets, in this order:

1. its own trials: on slot 0 the baseline, with the extra level its diagnosis needs,
   then that node's A/A run; on the first slot of every other node, from the start
   beside the baseline, the baseline twice: that node's A/A pair;
2. once the baseline's diagnosis has set out the search, its next value. The
   grid maps directly; the guided search falls back to the grid's values (the model's
   proposals and the bisection are sequential: each needs the trial before it);
3. once no value is left to start and every node's floor is in, a rerun of the choice
   so far (the serial session's rule, :meth:`TuneSession._pick`), when that choice has
   no confirmation yet: the confirmation starts on a slot that would otherwise wait for
   the last values. If they change the choice, the new one is rerun in turn; the early
   rerun stays a trial of its own, and confirms its setting only should the choice come
   back to it (a refuted choice gives way, as in the serial session).

The caller gives only comparable nodes (same CPUs, GPU count and model), so any two
trials may be compared; the floor every comparison uses is the widest of the nodes'
own A/A floors, each kept in ``TuneResult.nodes``.
"""

from __future__ import annotations

import math
import time
from collections import Counter, deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from infersight.core.errors import InfersightError
from infersight.core.tune_result import TuneResult
from infersight.tune.confirm import confirms
from infersight.tune.objective import aa_floor
from infersight.tune.search import StopSearch
from infersight.tune.session import TuneSession
from infersight.tune.trial import Measured, TrialRun, TrialSpec, TuneOptions, TuneWatcher

__all__ = ["NextTrial", "ParallelTuneSession", "RunTrials", "TrialDone"]

NextTrial = Callable[[int], TrialSpec | None]
TrialDone = Callable[[TrialSpec, TrialRun], None]
RunTrials = Callable[[NextTrial, TrialDone], None]

#: The roles of the A/A pairs: slot 0's (the baseline and its A/A run), other nodes'.
PAIR_ROLES = ("baseline", "a/a", "node baseline", "node a/a")


class ParallelTuneSession(TuneSession):
    """A TuneSession whose trials run ``len(slots)`` at a time."""

    def __init__(
        self,
        opts: TuneOptions,
        run_trials: RunTrials,
        slots: Sequence[str],
        *,
        nodes: Sequence[Mapping[str, Any]] = (),
        watcher: TuneWatcher | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        def one(setting: Mapping[str, int], name: str, role: str) -> TrialRun:
            # A trial on its own, on the first free slot (a confirmation the schedule
            # below did not run).
            todo, got = [TrialSpec(dict(setting), name, role)], []
            run_trials(lambda _slot: todo.pop() if todo else None, lambda _s, r: got.append(r))
            return got[0] if got else TrialRun(error=InfersightError("the trial did not run"))

        super().__init__(opts, one, watcher=watcher, clock=clock)
        if not slots:
            raise ValueError("a parallel session needs at least one slot")
        self.run_trials = run_trials
        #: The node id of each slot.
        self.slots = list(slots)
        self.result.nodes = [dict(n) for n in nodes]
        first: dict[str, int] = {}
        for i, node in enumerate(self.slots):
            first.setdefault(node, i)
        #: Each slot's own trials (roles, all of the baseline setting), before any other.
        self._own: dict[int, deque[str]] = {i: deque() for i in range(len(self.slots))}
        self._own[0].append("baseline")
        for s in first.values():
            if s != 0:
                self._own[s].extend(("node baseline", "node a/a"))
        self._todo: deque[int] = deque()  # the search space's values left to start
        #: The running trials by name: (index, role, the search space's index, started).
        self._running: dict[str, tuple[int, str, int | None, float]] = {}
        self._pairs: dict[int, list[Measured]] = {}  # each node's A/A pair, by its slot
        self._measured: list[Measured] = []
        self._reruns: dict[int, Measured] = {}  # by the search space's index
        self._base: Measured | None = None
        self._floored = False  # every node's floor is in
        self._halt = False  # start nothing more
        self._next = 1

    def run(self) -> TuneResult:
        result = super().run()
        count = Counter(t.node for t in result.trials)
        for n in result.nodes:
            n["trials"] = count.get(n.get("node_id"), 0)
        early = [m.trial.index for m in self._reruns.values() if m.trial.confirms is None]
        if early and result.stopped == "done":
            result.notes.append(
                f"trial(s) {', '.join(map(str, early))} reran the choice of the moment while "
                "other trials still ran; the final choice was another setting, so they "
                "confirm nothing"
            )
        return result

    def _run(self) -> None:
        self.run_trials(self._next_trial, self._done)
        if self.result.stopped == "interrupted":
            raise StopSearch

    # -- the schedule ---------------------------------------------------------------------
    def _next_trial(self, slot: int) -> TrialSpec | None:
        if self._halt:
            return None
        if self._own[slot]:
            return self._start(self.opts.baseline, self._own[slot].popleft(), slot, None)
        if self.space is None:
            return None  # the baseline's diagnosis has not planned the search yet
        if self._todo:
            i = self._todo.popleft()
            return self._start(self._setting(i), "grid", slot, i)
        again = self._to_confirm()
        return None if again is None else self._start(self._setting(again), "rerun", slot, again)

    def _start(self, setting: Mapping[str, int], role: str, slot: int, i: int | None) -> TrialSpec:
        index, self._next = self._next, self._next + 1
        if self.watcher:
            self.watcher.trial_started(index, role, setting)
        spec = TrialSpec(dict(setting), self._name(index, setting), role, slot)
        self._running[spec.name] = (index, role, i, time.time())
        return spec

    def _done(self, spec: TrialSpec, run: TrialRun) -> None:
        index, role, i, started = self._running.pop(spec.name)
        m = self._record(index, spec.setting, role, run, started)
        # Trials end out of order: keep them in the order they started.
        self.result.trials.sort(key=lambda t: t.index)
        self._measured.append(m)
        if m.trial.status == "partial":
            self.result.stopped, self._halt = "interrupted", True
            return
        if role in PAIR_ROLES and spec.slot is not None:
            self._pairs.setdefault(spec.slot, []).append(m)
        if role == "baseline":
            self._planned(m)
        elif role == "a/a":
            self._aa = m
        elif role == "grid" and i is not None:
            self._by_index[i] = m
        elif role == "rerun" and i is not None:
            self._reruns[i] = m
        # The floors once every node's pair is in (slot 0's A/A run is queued with the values).
        pairs_left = any(self._own.values()) or any(
            r in PAIR_ROLES for _, r, _, _ in self._running.values()
        )
        if self.space is not None and not self._floored and not pairs_left:
            self._floors()

    def _planned(self, base: Measured) -> None:
        """The search space from the baseline: slot 0's A/A run, then the values."""
        if base.trial.status != "ok":
            self.result.stopped, self._halt = "baseline failed", True
            return
        space = self._space_from(base)
        if space is None:
            self._halt = True
            return
        self._base = self._by_index[space.start] = base
        self._own[0].append("a/a")
        if self.opts.search != "grid":
            self.result.notes.append(
                "with --ray the guided search measures the grid's values, as many at once "
                "as there are workers (the model's proposals are sequential)"
            )
        self._todo = deque(
            self._fit_budget([i for i in range(len(space.values)) if i != space.start])
        )
        if self.watcher:
            own = sum(len(q) for q in self._own.values())
            self.watcher.planned(self._next - 1 + own + len(self._todo) + 1)

    def _floors(self) -> None:
        """Every node's A/A pair is in: the noise floor, the pooled baseline, and each
        trial so far called against it."""
        self._floored = True
        base = self._base
        assert base is not None and self.space is not None
        pairs = [(p[0], p[1]) for _, p in sorted(self._pairs.items()) if len(p) == 2]
        if not self._set_noise(self._node_floors(pairs)):
            self._todo.clear()  # too noisy to search: no value more is started
            return
        same = [m for pair in pairs for m in pair if m.trial.status == "ok"]
        pooled = Measured(base.trial, base.scored, [r for m in same for r in m.runs], base.result)
        self._baseline = self._by_index[self.space.start] = pooled
        for m in self._measured:
            if m.runs and m is not base:
                # The A/A run against its own pair's first run, as the serial session.
                first = base.runs if m is self._aa else pooled.runs
                m.trial.vs_baseline = self._call(first, m.runs)

    def _held(self, i: int) -> bool | None:
        """Whether setting ``i``'s confirmation held (None: it has none yet)."""
        assert self.space is not None
        again = self._aa if i == self.space.start and self._aa_ok() else self._reruns.get(i)
        if again is None:
            return None
        return confirms(self._by_index[i].scored, again.scored, self.opts.slo, self.delta)[0]

    def _to_confirm(self) -> int | None:
        """The choice so far when it needs a rerun that is not already running."""
        if not self._floored or self.result.stopped != "done":
            return None  # as the serial session: a stopped run confirms nothing more
        i = self._pick({j for j in self._by_index if self._held(j) is False})
        if i is None or self._held(i) is not None:
            return None
        if any(r == "rerun" and j == i for _, r, j, _ in self._running.values()):
            return None
        return i

    def _confirmation(self, i: int, winner: Measured) -> Measured | None:
        again = self._reruns.get(i)
        assert self.space is not None
        if again is None or (i == self.space.start and self._aa_ok()):
            return super()._confirmation(i, winner)  # the A/A run, or a rerun now
        self._judge(winner, again.trial, again.scored)
        return again

    def _aa_ok(self) -> bool:
        return self._aa is not None and self._aa.trial.status == "ok"

    # -- the budget and the floors ----------------------------------------------------------
    def _fit_budget(self, todo: list[int]) -> list[int]:
        """The values that fit in the budget, with slot 0's A/A run, ``len(slots)``
        trials at a time, and the winner's rerun after them (as if it could not start
        before the last value ends)."""
        budget, per = self.opts.budget_s, self._trial_time()
        if budget is None:
            return todo
        n = len(self.slots)
        while todo and self.clock() - self.t0 + per * (math.ceil((len(todo) + 1) / n) + 1) > budget:
            todo = todo[:-1]
            self.result.stopped = "budget"
        return todo

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
