"""The slot limit S when the engine does not export it (vLLM has no metric for
``--max-num-seqs``): the plateau of R while requests wait and the KV cache has room
(docs/design.md section 5).

A scheduler that keeps R flat while Q > 0 and KV < 0.9 stops at a sequence limit, not
at memory: R is that limit. Flat means p10 >= 0.9 x p90 over the scrapes where
requests waited, so a ramp, a drain or a noisy R is not taken for a limit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from infersight.diagnose.signals import SampleIndex

__all__ = ["MIN_SCRAPES", "Plateau", "infer_slots"]

#: R is flat when its p10 is at least this fraction of its p90.
FLAT_RATIO = 0.9
#: Scrapes a window needs before its engine gauges stand for it (fewer are instants,
#: not a window), and those with Q > 0 (and KV below full) before a plateau is inferred.
MIN_SCRAPES = 3
#: KV usage at or above which a plateau is memory's, not the slot limit's.
KV_FULL = 0.90


@dataclass(frozen=True, slots=True)
class Plateau:
    """R's plateau: the inferred slot limit and what showed it."""

    slots: int
    waiting: float
    scrapes: int
    p10: float
    p90: float
    kv_known: bool

    def sentence(self) -> str:
        """The evidence sentence: "R stays at 4 with 84 waiting: the slot limit is 4"."""
        return (
            f"R stays at {self.slots} with {self.waiting:.0f} waiting: the slot limit "
            f"is {self.slots}"
        )

    def source(self) -> str:
        kv = "KV < 0.9" if self.kv_known else "KV usage not exported"
        return (
            f"inferred from engine /metrics: R's plateau over {self.scrapes} scrapes with "
            f"Q > 0 ({kv}; R p10 {self.p10:.1f} >= 0.9 x p90 {self.p90:.1f})"
        )


def infer_slots(
    idx: SampleIndex, t0: float, t1: float, *, queued_outside: float | np.ndarray = 0.0
) -> Plateau | None:
    """S from R's plateau in ``[t0, t1]``, or None when R is not flat while requests wait.

    ``queued_outside``: requests the client had in flight that the engine neither ran
    nor listed as waiting (queued before its scheduler), one per scrape of
    ``engine.requests_running`` in the window or one for all; they count as waiting.
    """
    times = idx.times("engine.requests_running", t0, t1)
    if times.size < MIN_SCRAPES:
        return None
    r = idx.held("engine.requests_running", times)
    q = idx.held("engine.requests_waiting", times)
    kv = idx.held("engine.kv_cache_usage", times, agg="max")
    if r is None:
        return None
    waiting = (np.nan_to_num(q) if q is not None else np.zeros(times.size)) + queued_outside
    ok = np.isfinite(r) & (waiting >= 0.5)
    if kv is not None:
        ok &= ~(kv >= KV_FULL)  # unknown (NaN) KV at a scrape does not veto it
    if int(ok.sum()) < MIN_SCRAPES or ok.mean() < 0.5:
        return None
    rr = r[ok]
    p10, p90 = (float(x) for x in np.quantile(rr, [0.1, 0.9]))
    if p90 < 1.0 or p10 < FLAT_RATIO * p90:
        return None
    return Plateau(
        slots=max(1, round(float(np.median(rr)))),
        waiting=float(np.median(waiting[ok])),
        scrapes=int(ok.sum()),
        p10=p10,
        p90=p90,
        kv_known=kv is not None,
    )
