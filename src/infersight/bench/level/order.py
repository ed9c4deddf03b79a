"""Which level runs next: fixed lists, ``--sweep auto`` and ``--find-max``.

- Fixed: the ``--concurrency`` or ``--rate`` list, in order.
- ``--sweep auto``: a sequential baseline (concurrency 1), then the throughput level
  (everything at once: the server's saturation rate), then ``sweep_levels`` rates
  evenly between the two, lowest first. Once a rate is unsustainable (docs/design.md
  section 2) the higher ones are skipped: they would only queue for longer.
- ``--sweep closed``: the levels the server model needs (docs/design.md section 9):
  closed loop at 1, 2, 4, ... clients, doubling until two levels in a row add less
  than ``PLATEAU`` to the best throughput so far, so that leaving either out still
  leaves a level that shows the limit; at most ``MAX_CLOSED`` levels. Where the
  engine's slots are known (stated, or the embedded engine's), a plateau counts only
  once the clients fill them: an engine whose batching pays only at larger batches
  (llama.cpp on a CPU: flat from 2 to 4 clients, then 39% more at 8) would otherwise
  read as compute-bound at one sequence.
- ``--find-max``: the throughput level bounds the search; then a bisection on the rate
  keeps the highest rate whose level met every SLO *and* was sustainable, with at most
  1% of its answers errors. An unsustainable level fails whatever its percentiles: they
  only measure how long the level ran. A level that answers fast with errors keeps up
  with its rate (it is error-driven, not overloaded), but its SLOs hold only for the
  requests that succeeded, so it fails too. The curve (every rate tried) and the answer go into
  ``RunResult.config["find_max"]``.
"""

from __future__ import annotations

import math
from typing import Any

from infersight.bench.level.spec import LevelSpec, rate_name
from infersight.flags.bench import LoadSection

__all__ = ["LevelOrder", "level_passed", "unsustainable"]


def unsustainable(agg: dict[str, Any]) -> bool:
    """True when the level was judged and found unsustainable."""
    sus = agg.get("sustainability") or {}
    return bool(sus.get("judged")) and sus.get("sustainable") is False


#: Errors among a level's answers above which it fails find-max (the error-driven
#: verdict's threshold, docs/design.md section 5).
MAX_ERROR_SHARE = 0.01


def level_passed(agg: dict[str, Any]) -> bool:
    """A level passes when it met every SLO, was not unsustainable and at most 1% of
    its answers were errors."""
    ok = agg.get("success_rate")
    failing = isinstance(ok, int | float) and 1 - ok > MAX_ERROR_SHARE
    return bool((agg.get("slo") or {}).get("met")) and not unsustainable(agg) and not failing


#: Throughput growth per doubling of the clients under which a level adds no throughput.
PLATEAU = 0.1
#: ``--sweep closed`` stops here whatever it saw (c=1 ... c=32).
MAX_CLOSED = 6


class LevelOrder:
    """Hands out levels one at a time, deciding adaptive ones from earlier aggregates."""

    def __init__(self, load: LoadSection, fixed: list[LevelSpec], slots: int | None = None) -> None:
        """``fixed``: the configuration's fixed levels
        (:func:`~infersight.bench.level.spec.fixed_levels`), run first and in order;
        ``slots``: the engine's slot count, where known."""
        self.load = load
        self.slots = slots
        self._fixed = list(fixed)
        self._done: list[tuple[LevelSpec, dict[str, Any]]] = []
        self._arrival = load.open_arrival
        self._lo: float = 0.0
        self._hi: float | None = None
        self._best: float | None = None
        self._steps = 0

    @property
    def mode(self) -> str:
        if self.load.find_max:
            return "find-max"
        if self.load.sweep == "closed":
            return "sweep-closed"
        return "sweep-auto" if self.load.sweep else "fixed"

    def record(self, spec: LevelSpec, agg: dict[str, Any]) -> None:
        self._done.append((spec, agg))

    def next(self) -> LevelSpec | None:
        n = len(self._done)
        if self.mode == "fixed":
            return self._fixed[n] if n < len(self._fixed) else None
        if self.mode == "sweep-auto":
            return self._next_sweep(n)
        if self.mode == "sweep-closed":
            return self._next_closed(n)
        return self._next_find_max(n)

    def _next_sweep(self, n: int) -> LevelSpec | None:
        if n == 0:
            return LevelSpec("c=1", concurrency=1)
        if n == 1:
            return LevelSpec("throughput", rate=math.inf)
        base = self._done[0][1].get("request_throughput") or 0.0
        top = self._done[1][1].get("request_throughput") or 0.0
        k = n - 2
        if k >= self.load.sweep_levels or top <= 0:
            return None
        if k > 0 and unsustainable(self._done[-1][1]):
            return None  # every higher rate is unsustainable too
        lo, hi = min(base, top), max(base, top)
        rate = lo + (hi - lo) * (k + 1) / (self.load.sweep_levels + 1)
        if rate <= 0:
            return None
        return LevelSpec(self._unique(rate_name(rate)), rate=rate, arrival=self._arrival)

    def _next_closed(self, n: int) -> LevelSpec | None:
        thr = [agg.get("request_throughput") or 0.0 for _, agg in self._done]
        # against the best so far, not the level before: one noisy level must not read
        # as growth resuming
        flat = [thr[i] < max(thr[:i]) * (1 + PLATEAU) for i in range(1, len(thr))]
        filled = self.slots is None or 2 ** (n - 1) >= self.slots
        if n >= MAX_CLOSED or (flat[-2:] == [True, True] and filled):
            return None
        return LevelSpec(f"c={2**n}", concurrency=2**n)

    def _next_find_max(self, n: int) -> LevelSpec | None:
        if n == 0:
            return LevelSpec("throughput", rate=math.inf)
        spec, agg = self._done[-1]
        met = level_passed(agg)
        if n == 1:
            self._hi = agg.get("request_throughput") or 0.0
            if self._hi <= 0:
                return None
            if met:
                # Even saturation meets the SLO: the server's capacity is the answer.
                self._best = self._hi
                return None
        else:
            assert spec.rate is not None
            if met:
                self._lo = spec.rate
                self._best = max(self._best or 0.0, spec.rate)
            else:
                self._hi = spec.rate
        if self._steps >= self.load.find_max_steps or self._hi is None:
            return None
        self._steps += 1
        rate = (self._lo + self._hi) / 2
        return LevelSpec(self._unique(rate_name(rate)), rate=rate, arrival=self._arrival)

    def _unique(self, name: str) -> str:
        names = {s.name for s, _ in self._done}
        out, i = name, 2
        while out in names:
            out, i = f"{name}#{i}", i + 1
        return out

    def summary(self) -> dict[str, Any] | None:
        """``--find-max`` answer and curve (None for other modes)."""
        if self.mode != "find-max":
            return None
        curve = []
        for spec, agg in self._done:
            curve.append(
                {
                    "level": spec.name,
                    "target_rate": None
                    if spec.rate is None or math.isinf(spec.rate)
                    else spec.rate,
                    "request_throughput": agg.get("request_throughput"),
                    "goodput": agg.get("goodput"),
                    "slo_met": bool((agg.get("slo") or {}).get("met")),
                    "sustainable": (agg.get("sustainability") or {}).get("sustainable"),
                    "passed": level_passed(agg),
                    "checks": (agg.get("slo") or {}).get("checks"),
                }
            )
        return {
            "slo": dict(self.load.slo),
            "max_rate": self._best,
            "capacity": curve[0]["request_throughput"] if curve else None,
            "curve": curve,
        }
