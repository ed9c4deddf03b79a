"""The admission limits of the model (docs/design.md section 9, steps 1 and 2): the slot
limit found from the client's records by FIFO replay, and the KV capacity from the
engine's KV usage where it exports one.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass

import numpy as np

from infersight.core.server_model import Param
from infersight.servermodel.admission import reconstruct, running_at, violations
from infersight.servermodel.data import RunData

__all__ = ["VIOLATION_SHARE", "Slots", "find_slots", "fit_kv", "kv_need", "level_slots"]

#: Share of requests whose first token may precede their replayed admission (clock
#: jitter between a server's slot release and the client seeing the answer end).
VIOLATION_SHARE = 0.005


@dataclass(slots=True)
class Slots:
    """The slot limit found (None: not reached), its range and where it came from."""

    value: float | None
    low: float
    high: float | None
    source: str


def _floor(first: np.ndarray, sent: np.ndarray) -> tuple[float, float]:
    """The fastest first token from send (a request that did not wait), and how far
    below it a replayed admission may put one before it counts as impossible (the
    client sees an answer end a little after the server freed its slot)."""
    f = (first - sent)[np.isfinite(first - sent)]
    floor = float(f.min()) if f.size else 0.0
    return floor, max(0.002, 0.5 * floor)


def _typical(
    start: np.ndarray, arrival: np.ndarray, first: np.ndarray, prompt: np.ndarray, tol: float
) -> tuple[np.ndarray, np.ndarray]:
    """Which requests a replay makes wait, and each request's typical first token after
    admission: the line (by prompt length) through those of requests that did not wait."""
    waited = start > arrival + tol
    base = ~waited if (~waited).any() else np.ones(start.size, dtype=bool)
    p = np.nan_to_num(prompt)
    design = np.column_stack([np.ones(p.size), p])
    coef, *_ = np.linalg.lstsq(design[base], (first - arrival)[base], rcond=None)
    return waited, design @ coef


def _explains_waits(
    start: np.ndarray, arrival: np.ndarray, first: np.ndarray, prompt: np.ndarray, tol: float
) -> bool:
    """Whether a slot limit explains the requests it makes wait: their first tokens,
    counted from the replayed admission, look like those of requests that did not
    wait (for their prompt length), closer than counted from their send. A limit the
    run never reached squeezes a few requests' first tokens instead."""
    waited, typical = _typical(start, arrival, first, prompt, tol)
    if not waited.any() or waited.all():
        return bool(waited.any())
    with_limit = np.median(np.abs(first[waited] - start[waited] - typical[waited]))
    without = np.median(np.abs(first[waited] - arrival[waited] - typical[waited]))
    return bool(with_limit < without)


def _misfit(
    start: np.ndarray, arrival: np.ndarray, first: np.ndarray, prompt: np.ndarray, tol: float
) -> float:
    """How far first tokens, counted from the replayed admission, lie from their typical
    ones (:func:`_typical`): the mean distance."""
    _, typical = _typical(start, arrival, first, prompt, tol)
    return float(np.nanmean(np.abs(first - start - typical)))


def find_slots(d: RunData, use: np.ndarray) -> Slots:
    """Stated or exported slots as given; else the smallest S whose FIFO replay leaves
    no request with its first token before its admission (section 9, step 1), and no
    more than the engine ran while requests waited in it with KV room to spare."""
    arrival, end, first = d.sent[use], d.end[use], d.first[use]
    inflight = running_at(arrival, end, np.sort(arrival))
    top = int(inflight.max()) if inflight.size else 1
    if d.stated_slots:
        return Slots(d.stated_slots, d.stated_slots, d.stated_slots, d.stated_source)
    floor, tol = _floor(first, arrival)
    allowed = max(1, int(VIOLATION_SHARE * use.size))

    def consistent(s: int) -> bool:
        return violations(reconstruct(arrival, end, s, first=first), first, tol - floor) <= allowed

    # fewer slots only add impossible first tokens: bisect for the smallest consistent S
    lo = 1 + bisect.bisect_left(range(1, top), True, key=consistent)
    if lo < top:
        start = reconstruct(arrival, end, lo, first=first)
        # A client short of CPU stamps the ends that free slots late, so a few first
        # tokens come sooner after their replayed admission than any request makes
        # one, though none before it: a lower limit stands when it breaks no more than
        # that and explains the first tokens best. Every such limit is weighed: above
        # the truth all explain the waits about equally badly, so the misfit need not
        # fall at each step down (vLLM's client read 4 for 2 where 3 fitted no better).
        prompt = d.prompt[use]
        misfit = _misfit(start, arrival, first, prompt, tol)
        for s in range(lo - 1, 0, -1):
            below = reconstruct(arrival, end, s, first=first)
            if violations(below, first, 0.0) > allowed:
                break  # fewer slots only add first tokens before their admission
            fits = _misfit(below, arrival, first, prompt, tol)
            if fits < misfit:
                lo, start, misfit = s, below, fits
        if _explains_waits(start, arrival, first, prompt, tol):
            cap = d.running_while_waiting
            if cap is not None and lo != cap:
                # The engine's own count, with requests waiting in it, is the harder
                # fact: above it, a client short of CPU stamped its times late and spread
                # the replay; below it, first tokens waited for other prompts' prefill
                # (a batched prefill step), which the replay reads as a wait for a slot.
                return Slots(cap, cap, cap, "fitted")
            return Slots(float(lo), float(lo), float(lo), "fitted")
    return Slots(None, float(top), None, "not reached")


def kv_need(d: RunData, use: np.ndarray) -> np.ndarray:
    """The KV tokens each request reserves at admission: its prompt and the
    max_tokens it asked for (its answer's length where max_tokens is not known)."""
    out = d.output[use]
    if d.max_tokens is not None:
        out = np.maximum(out, d.max_tokens)
    return np.asarray(np.nan_to_num(d.prompt[use]) + out, dtype=float)


def _admitted(d: RunData, use: np.ndarray, start: np.ndarray, t: float) -> np.ndarray:
    """Which requests held KV at ``t``: the engine's own running count there, taken
    FIFO from the requests in flight (a replay without the KV limit would count those
    that waited for room), else the replayed admissions."""
    sent, end = d.sent[use], d.end[use]
    if d.run_t.size:
        j = int(np.argmin(np.abs(d.run_t - t)))
        if abs(float(d.run_t[j]) - t) < 1e-6:
            live = np.flatnonzero((sent <= t) & (t < end))
            live = live[np.argsort(sent[live], kind="stable")][: int(d.run_n[j])]
            on = np.zeros(use.size, dtype=bool)
            on[live] = True
            return on
    return np.asarray((start <= t) & (t < end))


def fit_kv(d: RunData, use: np.ndarray, start: np.ndarray) -> tuple[Param | None, str]:
    """KV capacity in tokens from the engine's KV usage, and the way tokens are held
    ("reserve" at admission: prompt + max_tokens, or "grow" as computed: the steadier
    reading; step 2). A scrape whose usage is at its cap (1.0) only bounds the
    capacity from above, so it is left out while others remain. A capacity the engine
    exports (vLLM's ``cache_config_info``) is taken as given; the usage then says only
    how tokens are held."""
    cap, how = _fit_kv(d, use, start)
    if d.kv_exported is None or cap is None:
        return cap, how
    given = float(d.kv_exported)
    # "engine": read from its /metrics, like an exported slot limit.
    return Param(value=given, low=given, high=given, unit="tokens", source="engine"), how


def _fit_kv(d: RunData, use: np.ndarray, start: np.ndarray) -> tuple[Param | None, str]:
    if d.kv_u.size < 3 or float(np.max(d.kv_u)) < 0.05:
        return None, "reserve"
    p = np.nan_to_num(d.prompt[use])
    out = d.output[use]
    need = kv_need(d, use)
    first, last = d.first[use], d.last[use]
    scrapes = [(t, u) for t, u in zip(d.kv_t, d.kv_u, strict=True) if u >= 0.05]
    below = [(t, u) for t, u in scrapes if u < 0.999]
    if len(below) >= 3:
        scrapes = below
    caps: dict[str, np.ndarray] = {}
    for mode in ("reserve", "grow"):
        vals = []
        for t, u in scrapes:
            on = _admitted(d, use, start, float(t))
            if mode == "reserve":
                held = float(np.sum(need[on]))
            else:
                frac = np.clip((t - first[on]) / np.maximum(last[on] - first[on], 1e-9), 0, 1)
                held = float(np.sum(p[on] + out[on] * np.nan_to_num(frac)))
            if held > 0:
                vals.append(held / u)
        caps[mode] = np.asarray(vals)
    best = min(
        caps, key=lambda m: (np.std(caps[m]) / np.mean(caps[m])) if caps[m].size > 2 else math.inf
    )
    v = caps[best]
    if v.size < 3:
        return None, "reserve"
    lo, mid, hi = (float(x) for x in np.quantile(v, [0.1, 0.5, 0.9]))
    return Param(value=mid, low=lo, high=hi, unit="tokens", source="engine KV usage"), best


def level_slots(d: RunData, idx: np.ndarray) -> np.ndarray | None:
    """Each request's slot limit when its level states its own (merged trials)."""
    if not d.levels or any(lv.slots is None for lv in d.levels):
        return None
    by_name = {lv.name: lv.slots for lv in d.levels}
    return np.asarray([by_name.get(str(x)) or np.inf for x in d.level[idx]], dtype=float)
