"""One load level as the configuration names it (``c=4``, ``r=2.5``, ``throughput``,
``trace x2``), and what the run stores of it."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

__all__ = ["LevelSpec", "rate_name"]


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
