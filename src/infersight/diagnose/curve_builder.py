"""``build_curve``: the run's capacity curve from its levels (docs/design.md section 2).

One point per load level, over the level's window of sends (or, when everything was
sent at once, the span its throughput was counted over; the whole level when it has
no window): the requests in flight (the engine's running count R where it
exports one, else the client's time-weighted count), throughput, TPOT/ITL and TTFT
(the aggregates' own figures), the queue, and the time a request spends in the engine
by Little's law (R / X). ``find_knee`` then finds the knee and the plateau, and the
best operating point is picked as ``stats.operating_point`` says.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from infersight.core.curve import CapacityCurve, CurvePoint
from infersight.core.numbers import as_float, number_at
from infersight.core.records import RunResult
from infersight.diagnose.knee import find_knee
from infersight.diagnose.plateau import MIN_SCRAPES
from infersight.diagnose.signals import RecordArrays, SampleIndex, inflight_stats
from infersight.stats.aggregate import aggregate
from infersight.stats.level_flags import flagged
from infersight.stats.operating_point import best_level

__all__ = ["build_curve", "level_aggregates", "level_point"]


def _window(agg: Mapping[str, Any], ra: RecordArrays, idx: np.ndarray) -> tuple[float, float]:
    """The level's window of sends; when that is short against the span its throughput
    was counted over (everything sent at once), that span; else its records' span."""
    win = agg.get("window") if isinstance(agg.get("window"), dict) else {}
    assert isinstance(win, dict)
    a, b = as_float(win.get("start")), as_float(win.get("end"))
    span = win.get("throughput_span")
    c = as_float(span[1]) if isinstance(span, list) and len(span) == 2 else None
    if a is not None and c is not None and c > a and (b is None or b - a < 0.5 * (c - a)):
        return a, c
    if a is not None and b is not None and b > a:
        return a, b
    t0 = float(np.min(ra.scheduled[idx]))
    ends = ra.end[idx][np.isfinite(ra.end[idx])]
    return t0, max(float(ends.max()) if ends.size else t0, t0 + 1e-6)


def _unqueued_time(ra: RecordArrays, idx: np.ndarray, tpot: float | None) -> float | None:
    """What a request takes when it does not wait: the level's fastest time from send
    to first token, then its mean output at the median TPOT."""
    ok = idx[ra.ok[idx]]
    first = ra.first[ok] - ra.sent[ok]
    first = first[np.isfinite(first)]
    out = ra.output[ok]
    out = out[np.isfinite(out)]
    if not first.size:
        return None
    return (
        float(first.min()) + max(0.0, float(out.mean()) - 1.0) * (tpot or 0.0) if out.size else None
    )


def level_point(
    name: str, agg: Mapping[str, Any], ra: RecordArrays, idx: np.ndarray, sidx: SampleIndex
) -> CurvePoint:
    """The curve's point for one level (its records ``idx``, its aggregate ``agg``).

    Without the engine's R from at least ``MIN_SCRAPES`` scrapes of the level, the
    client's count includes requests queued before the engine: the time in the engine
    is then no more than an unqueued request's own (:func:`_unqueued_time`), and the
    rest of the client's count is the queue.
    """
    t0, t1 = _window(agg, ra, idx)
    client, _ = inflight_stats(ra.sent[idx], ra.end[idx], t0, t1)
    a, b = t0, t1
    if not sidx.times("engine.requests_running", a, b).size:
        # a short window between two scrapes: the whole level
        a, b = float(np.min(ra.scheduled[idx])), float(np.nanmax(ra.end[idx], initial=t1))
    # Fewer scrapes are instants, not the level's mean: one that lands on a closed-loop
    # handover reads R far below the requests the engine runs.
    enough = sidx.times("engine.requests_running", a, b).size >= MIN_SCRAPES
    running = sidx.mean_sum("engine.requests_running", a, b) if enough else None
    thr = as_float(agg.get("request_throughput"))
    inflight, source = (running, "engine") if running is not None else (client, "client")
    queue = max(0.0, client - running) if running is not None else None
    waiting = sidx.mean_sum("engine.requests_waiting", t0, t1)
    if queue is not None and (waiting or 0.0) < 0.5 and queue < max(0.5, 0.25 * client):
        # Nothing waits: the client's time-weighted count is the finer measure of the same
        # requests (a few scrapes that catch closed-loop handovers read R low).
        inflight, queue = client, 0.0
    in_engine = inflight / thr if thr and inflight else None
    if running is None and in_engine is not None and thr:
        alone = _unqueued_time(ra, idx, as_float(number_at(agg, "tpot", "p50")))
        if alone is not None and alone < in_engine:
            in_engine = alone
            queue = max(0.0, client - thr * alone)
            inflight = thr * alone
        elif alone is not None:
            queue = 0.0  # the requests took no longer than an unqueued one
    target = agg.get("target") if isinstance(agg.get("target"), dict) else {}
    assert isinstance(target, dict)
    sus = agg.get("sustainability") if isinstance(agg.get("sustainability"), dict) else {}
    assert isinstance(sus, dict)
    conc = target.get("concurrency")
    return CurvePoint(
        level=name,
        inflight=inflight,
        inflight_source=source,
        client_inflight=client or None,
        concurrency=int(conc) if isinstance(conc, int | float) and conc else None,
        offered_rate=as_float(sus.get("offered_rate")) or as_float(target.get("rate")),
        throughput=thr,
        token_throughput=as_float(agg.get("output_token_throughput")),
        tpot_p50=as_float(number_at(agg, "tpot", "p50")),
        itl_p50=as_float(number_at(agg, "itl", "p50")),
        ttft_p50=as_float(number_at(agg, "ttft", "p50")),
        ttft_p99=as_float(number_at(agg, "ttft", "p99")),
        queue=queue,
        time_in_engine=in_engine,
        steady=bool((agg.get("window") or {}).get("steady")),
        sustainable=sus.get("sustainable") if sus.get("judged") else None,
        client_limited=flagged(dict(agg)),
    )


def level_aggregates(
    result: RunResult, levels: Sequence[tuple[str | None, np.ndarray]]
) -> dict[str, Any]:
    """Each level's aggregate: as the run stored it, else recomputed from its records
    (the aggregates are a cache of the records; docs/design.md section 1)."""
    specs = {
        str(lv.get("name")): lv for lv in result.config.get("levels") or [] if isinstance(lv, dict)
    }
    out: dict[str, Any] = {}
    for name, idx in levels:
        if name is None:
            continue
        stored = result.aggregates.get(name)
        if isinstance(stored, dict) and stored.get("requests"):
            out[name] = stored
            continue
        spec = specs.get(name, {})
        conc, rate = spec.get("concurrency"), spec.get("rate")
        out[name] = aggregate(
            [result.records[int(i)] for i in idx],
            target_concurrency=int(conc) if isinstance(conc, int | float) else None,
            target_rate=float(rate) if isinstance(rate, int | float) else None,
        )
    return out


def build_curve(
    levels: Sequence[tuple[str | None, np.ndarray]],
    aggregates: Mapping[str, Any],
    ra: RecordArrays,
    sidx: SampleIndex,
) -> CapacityCurve | None:
    """The curve of the levels (name, record indices) that have an aggregate; None when
    the run has no such level (a monitor recording)."""
    points = []
    aggs: list[tuple[str, Mapping[str, Any]]] = []
    for name, idx in levels:
        agg = aggregates.get(name) if name is not None else None
        if name is None or not isinstance(agg, dict) or not idx.size:
            continue
        points.append(level_point(name, agg, ra, idx, sidx))
        aggs.append((name, agg))
    if not points:
        return None
    curve = CapacityCurve(
        points=sorted(points, key=lambda p: p.client_inflight or p.inflight or 0.0)
    )
    src = {p.inflight_source for p in points}
    client_txt = (
        "the client's requests in flight, less those queued: throughput x an "
        "unqueued request's own time (the fastest first token, then the median "
        "TPOT), since the engine exports no running count"
    )
    curve.notes.append(
        "running: the engine's count (R)"
        if src == {"engine"}
        else f"running: {client_txt}"
        if src == {"client"}
        else f"running: the engine's R where its scrapes cover the level, else {client_txt}"
    )
    find_knee(curve)
    sustainable = [p.throughput for p in points if p.throughput and p.sustainable is not False]
    achieved = [p.throughput for p in points if p.throughput]
    curve.capacity = max(sustainable or achieved) if achieved else None
    curve.best_level = best_level(aggs, knee_level=curve.knee_level)
    return curve
