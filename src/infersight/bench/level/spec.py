"""One load level as the configuration names it (``c=4``, ``r=2.5``, ``throughput``,
``trace x2``), and what the run stores of it."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from infersight.flags.bench import LoadSection, ReplaySection

__all__ = ["LevelSpec", "fixed_levels", "rate_name"]


@dataclass(frozen=True, slots=True)
class LevelSpec:
    """One load level: closed loop at ``concurrency``, or open loop at ``rate``/s.

    ``rate == math.inf`` is the throughput level: every request is sent at once.
    """

    name: str
    concurrency: int | None = None
    rate: float | None = None
    arrival: str = "constant"
    #: ``--repeat``: the level this one runs again ("c=4" for "c=4#2").
    repeat_of: str | None = None
    #: A trace replay at this multiple of the trace's own speed.
    speedup: float | None = None

    def as_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name}
        if self.repeat_of is not None:
            d["repeat_of"] = self.repeat_of
        if self.speedup is not None:
            d["speedup"] = self.speedup
        if self.concurrency is not None:
            d["concurrency"] = self.concurrency
        if self.rate is not None:
            d["rate"] = None if math.isinf(self.rate) else self.rate
            d["arrival"] = "all-at-once" if math.isinf(self.rate) else self.arrival
        return d


def rate_name(rate: float) -> str:
    return "throughput" if math.isinf(rate) else f"r={rate:.4g}"


def fixed_levels(load: LoadSection, replay: ReplaySection) -> list[LevelSpec]:
    """The fixed levels to run; sweeps and --find-max add theirs as they go. With
    ``repeat`` N > 1, every level N times, interleaved: ``c=1#1, c=4#1, c=1#2, ...``,
    so a drift of the server over time spreads over all levels alike."""
    if replay.trace:
        return [LevelSpec(f"trace x{s:g}", speedup=s) for s in replay.speedup or (1.0,)]
    if load.rate:
        arrival = load.open_arrival
        base = [LevelSpec(rate_name(r), rate=r, arrival=arrival) for r in load.rate]
    elif load.sweep or load.find_max:
        return []
    else:
        base = [LevelSpec(f"c={c}", concurrency=c) for c in (load.concurrency or (1,))]
    if load.repeat == 1:
        return base
    return [
        dataclasses.replace(lv, name=f"{lv.name}#{k}", repeat_of=lv.name)
        for k in range(1, load.repeat + 1)
        for lv in base
    ]
