"""Admission: at most S requests run, and (where KV is known) those whose tokens fit;
the rest wait in arrival order (docs/design.md section 9).

:func:`reconstruct` replays a run's arrivals and ends through that rule to find when
each request was admitted: a request starts when it arrived, or when enough earlier
requests have ended. With the right S no request gets its first token before it was
admitted; a smaller S makes some do so (:func:`violations`), which is how the slot
limit is found from the client's records alone.
"""

from __future__ import annotations

import heapq

import numpy as np

__all__ = ["TIE", "arrival_order", "reconstruct", "running_at", "violations"]


#: Sends closer than this are a tie: which reached the server first is unknown. A
#: load generator's own send stamps jitter by this much when its clients start
#: together (GuideLLM's recorded a level's first 8 sends 19 ms out of order).
TIE = 0.015


def arrival_order(arrival: np.ndarray, first: np.ndarray | None) -> np.ndarray:
    """The order requests reached the server: by send time, and within a burst of
    sends closer than :data:`TIE` (a closed loop's clients start together) by first
    token, which FIFO admission hands out in the order of arrival."""
    by_send = np.argsort(arrival, kind="stable")
    if first is None or arrival.size < 2:
        return by_send
    burst = np.concatenate([[0], np.cumsum(np.diff(arrival[by_send]) > TIE)])
    cluster = np.empty(arrival.size, dtype=int)
    cluster[by_send] = burst
    key = np.where(np.isfinite(first), first, np.inf)
    return np.lexsort((key, cluster))


def reconstruct(
    arrival: np.ndarray,
    end: np.ndarray,
    slots: float | np.ndarray | None,
    need: np.ndarray | None = None,
    kv: float | None = None,
    first: np.ndarray | None = None,
) -> np.ndarray:
    """Admission times under FIFO with ``slots`` (None: unlimited; an array: each
    request's own limit, for runs at several settings one after the other) and a KV
    budget ``kv`` of tokens, each request holding ``need`` tokens until its end.

    Requests are taken in arrival order (:func:`arrival_order`, with ``first``: their
    first tokens); one that never ended (NaN end) holds its place until the last known
    end.
    """
    n = arrival.size
    start = np.empty(n)
    if n == 0:
        return start
    order = arrival_order(arrival, first)
    horizon = float(np.nanmax(end)) if np.isfinite(end).any() else float(arrival.max())
    ends = np.where(np.isfinite(end), end, horizon)
    caps = (
        np.full(n, float("inf"))
        if slots is None
        else np.broadcast_to(np.asarray(slots, dtype=float), (n,))
    )
    budget = float("inf") if kv is None or need is None else kv
    running: list[tuple[float, float]] = []  # (end, tokens held)
    held = 0.0
    prev = -float("inf")
    for i in order:
        t = max(float(arrival[i]), prev)  # FIFO: never before the one ahead of it
        tokens = 0.0 if need is None else float(need[i])
        while running and running[0][0] <= t:
            held -= heapq.heappop(running)[1]
        cap = caps[i]
        while running and (len(running) >= cap or held + tokens > budget):
            e, h = heapq.heappop(running)
            held -= h
            t = max(t, e)
        start[i] = t
        prev = t
        heapq.heappush(running, (float(ends[i]), tokens))
        held += tokens
    return start


def violations(start: np.ndarray, first: np.ndarray, tolerance: float) -> int:
    """Requests whose first token came sooner after their admission than any request
    can make one: before ``start - tolerance`` (a negative tolerance: a floor)."""
    ok = np.isfinite(first)
    return int(np.count_nonzero(first[ok] < start[ok] - tolerance))


def running_at(start: np.ndarray, end: np.ndarray, times: np.ndarray) -> np.ndarray:
    """How many requests were admitted and not yet ended at each of ``times``."""
    s = np.sort(start[np.isfinite(start)])
    e = np.sort(end[np.isfinite(end)])
    return (
        np.searchsorted(s, times, side="right") - np.searchsorted(e, times, side="right")
    ).astype(float)
