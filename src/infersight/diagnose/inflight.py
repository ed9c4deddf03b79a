"""The client's requests in flight at given instants, to set against an engine's scrape.

An engine's ``/metrics`` is a snapshot taken at one moment while the scrape is being
served, and a request shows in it only once the engine's HTTP front has read and
tokenized it. So the client's time-averaged in-flight count cannot be set against the
mean of a few scrapes: one scrape that lands while a closed-loop batch is handed over
reads far fewer running than the client has in flight, and a mean over three scrapes
turns that instant into "1.3 requests waiting" on an engine with idle slots.
:class:`InFlight` counts, at each scrape, only the requests the engine must already have
seen (sent at least the run's fastest time to first token before it, ``settle``) and still
had when the scrape ended (not finished before it returned).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["InFlight", "steps"]


@dataclass(frozen=True, slots=True)
class InFlight:
    """Send and end times of a run's requests, for counting those in flight at instants.

    ``settle`` is the run's fastest time from send to first token: a request younger
    than that may still be in the engine's HTTP front, where no engine counts it.
    """

    #: Send times, sorted.
    sent: np.ndarray
    #: End times in the order of ``sent`` (inf: never ended).
    end_by_sent: np.ndarray
    #: End times, sorted.
    ends: np.ndarray
    settle: float

    @classmethod
    def build(
        cls, sent: np.ndarray, end: np.ndarray, first: np.ndarray, ok: np.ndarray
    ) -> InFlight:
        """From record columns (NaN where unknown): requests never sent are left out,
        and one without an end is in flight for good."""
        m = np.isfinite(sent)
        s = sent[m]
        e = np.where(np.isfinite(end[m]), end[m], np.inf)
        order = np.argsort(s, kind="stable")
        ttft = (first - sent)[ok & np.isfinite(first) & np.isfinite(sent)]
        settle = max(0.0, float(ttft.min())) if ttft.size else 0.0
        return cls(sent=s[order], end_by_sent=e[order], ends=np.sort(e), settle=settle)

    def count(self, t: np.ndarray, dt: np.ndarray, min_age: float = 0.0) -> np.ndarray:
        """For each instant ``t[i]``: the requests sent at least ``min_age`` before it and
        still in flight at ``t[i] + dt[i]`` (the end of the scrape taken at ``t[i]``)."""
        a = t - min_age
        b = t + np.maximum(dt, 0.0)
        n_sent = np.searchsorted(self.sent, a, "right")  # sent <= a
        n_ended = np.searchsorted(self.ends, b, "left")  # ended before b
        out: np.ndarray = n_sent - n_ended
        # A request sent after a and ended before b was taken off above but never
        # counted: add those back (they lie wholly inside (a, b), a short slice).
        lo, hi = n_sent, np.searchsorted(self.sent, b, "left")
        for i in np.flatnonzero(hi > lo):
            out[i] += int(np.count_nonzero(self.end_by_sent[lo[i] : hi[i]] < b[i]))
        return out

    def split(self, limit: float, t0: float, t1: float) -> tuple[float, float, float, float]:
        """The client's in-flight count over [t0, t1], exactly, set against a slot
        ``limit``: the time-mean of those within it (running), of those above it
        (queued), the fraction of the time any were above it, and the most above it."""
        span = max(1e-9, t1 - t0)
        counts, held = steps(self.sent, self.end_by_sent, t0, t1)
        above = np.clip(counts - limit, 0.0, None)
        running = float(np.sum(np.minimum(counts, limit) * held)) / span
        queued = float(np.sum(above * held)) / span
        frac = float(np.sum(held[above >= 0.5])) / span
        return running, queued, frac, float(above.max())


def steps(sent: np.ndarray, end: np.ndarray, t0: float, t1: float) -> tuple[np.ndarray, np.ndarray]:
    """The count of requests in flight (``sent <= t < end``; ``end`` inf: never ended)
    over [t0, t1], as steps: each step's count and how long it holds."""
    n0 = int(np.count_nonzero((sent <= t0) & (end > t0)))
    starts = sent[(sent > t0) & (sent < t1)]
    stops = end[(end > t0) & (end < t1)]
    times = np.concatenate([starts, stops])
    deltas = np.concatenate([np.ones(starts.size), -np.ones(stops.size)])
    order = np.lexsort((deltas, times))  # ends before starts at equal times
    counts = n0 + np.concatenate([[0.0], np.cumsum(deltas[order])])
    held = np.diff(np.concatenate([[t0], times[order], [t1]]))
    return counts, held
