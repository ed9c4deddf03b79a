"""Is an open-loop level sustainable? (docs/design.md section 2, "Sustainability")

A level is *unsustainable* when the server answers fewer requests than were offered
(short by more than 5%; a success and an error are both answers, so a server that fails
fast is error-driven, not overloaded), or when the number of requests in flight grows
through the window (least-squares slope with its 95% interval above 0). Its latency percentiles
then grow with the level's duration and say nothing about the server, while the rate
it did complete is an estimate of the server's capacity.

Both tests are built to be unbiased in a steady state:

- *Answers* (successes and errors) are counted one fill time (the median latency of
  the first sends) after the window, over the same length as the window: ``[start + f, end + f]``
  against the sends in ``[start, end]``. A stationary server shifts every send by its
  latency, so the two counts agree up to edge effects (a tolerance of 2 requests).
- *In-flight growth* is fitted, from one fill time after the first send (while the
  pipeline fills, in-flight rises on any server) to the window's end, to the mean
  in-flight count of 10 equal blocks (batch means: single readings of a queue are
  strongly correlated, and their naive interval would be far too narrow), with
  Student's t on 8 degrees of freedom.

Both really measure how much the queue grew over the window, and a stable queue
wanders by about the standard deviation of its in-flight count: a shortfall or a
growth smaller than that (or than 2 requests) is never judged. (An exactly periodic
schedule also has a numerically positive slope with a zero-width interval.)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from infersight.core.records import RequestRecord
from infersight.stats.windows import MIN_REQUESTS, LevelWindow, fill_time, finish_time

__all__ = ["SHORTFALL_LIMIT", "inflight_trend", "judge_sustainability"]

#: Completions may fall short of the offered rate by this fraction (docs/design.md: 5%).
SHORTFALL_LIMIT = 0.05
#: Edge effects: this many requests of shortfall or growth are never judged.
_SLACK_REQUESTS = 2
_BLOCKS = 10
#: The in-flight trend needs this many sends after the fill time.
_TREND_MIN_SENDS = 10
#: Student's t, 97.5% quantile, 8 degrees of freedom (10 blocks, 2 parameters).
_T975_DF8 = 2.306


def _failed(r: RequestRecord) -> bool:
    """An error the server gave back (a cancelled request is no answer)."""
    return not r.ok and r.error is not None and not r.cancelled and r.end is not None


def _answers(records: Sequence[RequestRecord], start: float, end: float, fill: float) -> int:
    """Successes finishing one fill time after the window, and errors answered for the
    window's own sends by then. An error comes back at once, not a fill time later, so
    it is matched to its send: shifted, one sent early in the window would be lost."""
    ok = sum(1 for r in records if r.ok and start + fill <= finish_time(r) <= end + fill)
    failed = sum(
        1
        for r in records
        if _failed(r) and start <= r.scheduled <= end and finish_time(r) <= end + fill
    )
    return ok + failed


def inflight_trend(
    records: Sequence[RequestRecord], start: float, end: float, blocks: int = _BLOCKS
) -> dict[str, Any] | None:
    """Least-squares slope of the in-flight count through [start, end], per second.

    A request is in flight from its intended send time to its finish (so requests the
    client holds count, as they do for the server's queue). Returns ``slope``, its 95%
    interval ``ci``, ``mean`` in flight and ``growth`` (slope times the window), or
    None for an empty window.
    """
    dur = end - start
    if dur <= 0 or not records or blocks < 3:
        return None
    s = np.fromiter((r.scheduled for r in records), np.float64, len(records))
    f = np.fromiter((finish_time(r) for r in records), np.float64, len(records))
    edges = np.linspace(start, end, blocks + 1)
    means = np.empty(blocks)
    for k in range(blocks):
        lo, hi = edges[k], edges[k + 1]
        overlap = np.clip(np.minimum(f, hi) - np.maximum(s, lo), 0.0, None)
        means[k] = overlap.sum() / (hi - lo)
    x = (edges[:-1] + edges[1:]) / 2 - start
    xc = x - x.mean()
    sxx = float(np.dot(xc, xc))
    slope = float(np.dot(xc, means - means.mean()) / sxx)
    resid = means - means.mean() - slope * xc
    se = math.sqrt(float(np.dot(resid, resid)) / (blocks - 2) / sxx)
    t = _T975_DF8 if blocks == _BLOCKS else 2.0
    return {
        "slope": slope,
        "ci": [slope - t * se, slope + t * se],
        "mean": float(means.mean()),
        "std": _inflight_std(s, f, start, end),
        "growth": slope * dur,
    }


def _inflight_std(s: np.ndarray, f: np.ndarray, start: float, end: float) -> float:
    """Time-weighted standard deviation of the in-flight count over [start, end]."""
    n0 = int(np.count_nonzero((s <= start) & (f > start)))
    ins, outs = s[(s > start) & (s < end)], f[(f > start) & (f < end)]
    times = np.concatenate([ins, outs])
    order = np.argsort(times, kind="stable")
    steps = np.concatenate([np.ones(ins.size), -np.ones(outs.size)])[order]
    level = n0 + np.concatenate([[0.0], np.cumsum(steps)])
    bounds = np.concatenate([[start], times[order], [end]])
    dt = np.diff(bounds)
    mean = float(np.dot(level, dt)) / (end - start)
    var = float(np.dot((level - mean) ** 2, dt)) / (end - start)
    return math.sqrt(max(var, 0.0))


def judge_sustainability(
    records: Sequence[RequestRecord], window: LevelWindow, target_rate: float | None
) -> dict[str, Any]:
    """The ``sustainability`` entry of an open-loop level's aggregate.

    ``offered_rate`` is the window's sends per second; ``achieved_rate`` the level's
    completions per second over its throughput span (the request throughput), which
    is the ``capacity_estimate`` of an unsustainable level.
    """
    out: dict[str, Any] = {
        "judged": False,
        "sustainable": None,
        "offered_rate": None,
        "achieved_rate": None,
        "capacity_estimate": None,
        "completion_ratio": None,
        "inflight_slope": None,
        "inflight_slope_ci": None,
        "inflight_growth": None,
        "reasons": [],
        "note": None,
    }
    start, end = window.start, window.end
    dur = end - start
    if target_rate is None or not math.isfinite(target_rate):
        out["note"] = "not judged: only open-loop levels at a finite rate are"
        return out
    if dur <= 0 or len(window.members) < 2:
        out["note"] = "not judged: the window's sends span no time"
        return out
    fill = fill_time(records)
    sends = len(window.members)
    # Answers, not successes: an error that came back is a request the server kept up
    # with (the error-driven verdict judges it), not one still queued.
    done = _answers(records, start, end, fill)
    offered, ratio = sends / dur, done / sends
    # The rate it completed: the level's throughput (completions over the throughput
    # span). Over that span an overloaded server is busy throughout, so this is its
    # capacity, measured over far more completions than the test above counts.
    span = window.span_end - start
    n_span = sum(1 for r in records if r.ok and start <= finish_time(r) <= window.span_end)
    achieved = n_span / span
    out.update(judged=True, offered_rate=offered, achieved_rate=achieved, completion_ratio=ratio)
    # In-flight rises while the pipeline fills: fit the trend only after one fill time.
    t_fill = min(r.scheduled for r in records) + fill
    lo = max(start, t_fill)
    enough = sum(1 for r in window.members if r.scheduled >= lo) >= _TREND_MIN_SENDS
    trend = inflight_trend(records, lo, end) if enough else None
    # Both tests measure how much the queue grew, and a stable queue wanders: the
    # shortfall compares two single readings of the in-flight count (noise about 1.4
    # standard deviations), the slope a fit through the window (less noisy).
    std = trend["std"] if trend is not None else 0.0
    reasons: list[str] = []
    counted = sends >= MIN_REQUESTS  # a few requests short of a handful says nothing
    if counted and ratio < 1 - SHORTFALL_LIMIT and sends - done > max(_SLACK_REQUESTS, 3 * std):
        reasons.append(
            f"answered {ratio:.0%} of the requests offered in the window, one fill time "
            f"later ({achieved:.3g} req/s completed against {offered:.3g} offered)"
        )
    if trend is not None:
        out["inflight_slope"] = trend["slope"]
        out["inflight_slope_ci"] = trend["ci"]
        out["inflight_growth"] = trend["growth"]
        if trend["ci"][0] > 0 and trend["growth"] > max(_SLACK_REQUESTS, 2 * std):
            reasons.append(
                f"in flight grew by {trend['slope']:.3g}/s (95% CI {trend['ci'][0]:.3g} to "
                f"{trend['ci'][1]:.3g}), {trend['growth']:.0f} requests over the window"
            )
    out["reasons"] = reasons
    out["sustainable"] = not reasons
    if reasons:
        out["capacity_estimate"] = achieved
    return out
