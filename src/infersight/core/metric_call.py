"""One metric of run B against run A, as stored (docs/design.md section 2, "Comparing
runs"): the ratio, its interval and the call.

The document lives in ``core`` because the TuneResult stores it; the maths that fills
it in is :mod:`infersight.stats.significance`.
"""

from __future__ import annotations

from pydantic import BaseModel

__all__ = [
    "BETTER",
    "CONFIDENCE",
    "DEFAULT_DELTA",
    "NOT_COMPARED",
    "RUN_MORE",
    "SAME",
    "WORSE",
    "MetricCall",
]

#: The noise threshold when no A/A spread was measured.
DEFAULT_DELTA = 0.05
CONFIDENCE = 0.95

BETTER = "better"
WORSE = "worse"
SAME = "no significant difference"
RUN_MORE = "inconclusive: run more"
#: Not a call about the server: the figure cannot be compared at all (unsustainable).
NOT_COMPARED = "not compared"


class MetricCall(BaseModel):
    """One metric of B against A: the ratio, its 95% interval and the call."""

    metric: str
    label: str
    better: str
    #: The means the interval is about (of the slices, or of the runs), A then B.
    a: float | None = None
    b: float | None = None
    ratio: float | None = None
    low: float | None = None
    high: float | None = None
    delta: float = DEFAULT_DELTA
    #: The interval's confidence: 95%, or higher when several runs are compared with
    #: one baseline (:func:`family_confidence`).
    confidence: float = CONFIDENCE
    call: str = RUN_MORE
    #: "requests" (a percentile, one run a side: a bootstrap over requests), "slices"
    #: (a rate, one run a side: its window cut in time) or "runs" (--repeat).
    basis: str = "slices"
    units: tuple[int, int] = (0, 0)
    requests: tuple[int, int] = (0, 0)
    note: str = ""

    def interval_text(self) -> str:
        """``0.93 [0.85, 1.02]`` (B/A), or ``-`` when there is no estimate."""
        if self.ratio is None:
            return "-"
        if self.low is None or self.high is None:
            return f"{self.ratio:.3g} [unbounded]"
        return f"{self.ratio:.3g} [{self.low:.3g}, {self.high:.3g}]"
