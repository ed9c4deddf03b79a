"""Aggregates over request records (``shared/design.md`` section 2).

:func:`aggregate` turns the records of one load level into the numbers every output
shows. It is a pure function of the records, so a RunResult's aggregates can always be
recomputed, and records merged from several worker processes give the same answer as
one process would (the order of records never matters).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from infersight.core.records import RequestRecord
from infersight.core.stats import PERCENTILES, summarize

__all__ = [
    "CLIENT_CPU_LIMIT",
    "LAG_P99_LIMIT",
    "RATE_RATIO_LIMIT",
    "SLO_METRICS",
    "Window",
    "aggregate",
    "meets_slo",
    "request_metric",
]

#: Client-limited thresholds (design.md section 2).
LAG_P99_LIMIT = 0.005
CLIENT_CPU_LIMIT = 90.0  # percent of one core, per worker
RATE_RATIO_LIMIT = 0.95

#: Per-request metrics an SLO may name, e.g. ``ttft_p99``.
SLO_METRICS = ("ttft", "ttft_from_sent", "tpot", "itl", "e2e", "e2e_from_sent")
_SLO_STATS = (*PERCENTILES, "mean", "max")


@dataclass(frozen=True, slots=True)
class Window:
    """The steady-state window: which part of a level the aggregates describe.

    ``method`` is one of:

    - ``"all"``: from the first intended send to the last completion;
    - ``"time"``: cut ``warmup`` seconds after the first intended send and ``cooldown``
      seconds before the last completion;
    - ``"count"``: cut the first ``warmup`` and the last ``cooldown`` completions;
    - ``"auto"``: the span during which the number of requests in flight is at its
      target (closed loop); for an open loop, from one median latency after the first
      intended send (the pipeline has filled) to the last intended send (arrivals stop);
    - ``"explicit"``: the absolute monotonic times ``start`` and ``end``.
    """

    method: str = "all"
    warmup: float = 0.0
    cooldown: float = 0.0
    start: float | None = None
    end: float | None = None

    def resolve(
        self, records: Sequence[RequestRecord], target_concurrency: int | None = None
    ) -> tuple[float, float, str]:
        """Absolute ``(start, end, method)`` for these records."""
        t0 = min(r.scheduled for r in records)
        t1 = max(_finish(r) for r in records)
        if self.method == "explicit":
            return (
                t0 if self.start is None else self.start,
                t1 if self.end is None else self.end,
                "explicit",
            )
        if self.method == "time":
            start, end = t0 + self.warmup, t1 - self.cooldown
            if end <= start:
                return t0, t1, "all (time cuts left no window)"
            return start, end, f"time (warmup {self.warmup:g}s, cooldown {self.cooldown:g}s)"
        if self.method == "count":
            ends = sorted(_finish(r) for r in records)
            n_lo, n_hi = int(self.warmup), int(self.cooldown)
            if n_lo + n_hi >= len(ends):
                return t0, t1, "all (count cuts left no window)"
            start = ends[n_lo - 1] if n_lo > 0 else t0
            return start, ends[len(ends) - 1 - n_hi], f"count (warmup {n_lo}, cooldown {n_hi})"
        if self.method == "auto":
            return _auto_window(records, target_concurrency, t0, t1)
        if self.method != "all":
            raise ValueError(f"unknown window method {self.method!r}")
        return t0, t1, "all"

    @classmethod
    def parse(cls, warmup: str | None, cooldown: str | None) -> Window:
        """From CLI strings: ``auto``, ``10s`` (seconds), ``20`` (requests) or ``0``."""
        w, c = (warmup or "0").strip().lower(), (cooldown or "0").strip().lower()
        wv, wu = (0.0, "n") if w == "auto" else _parse_cut(w, "--warmup")
        cv, cu = (0.0, "n") if c == "auto" else _parse_cut(c, "--cooldown")
        if w == "auto" or c == "auto":
            return cls("auto")
        if wv == 0 and cv == 0:
            return cls("all")
        units = {u for v, u in ((wv, wu), (cv, cu)) if v}
        if len(units) > 1:
            raise ValueError("--warmup and --cooldown must both be seconds or both counts")
        return cls("time" if units == {"s"} else "count", wv, cv)


def _parse_cut(text: str, flag: str) -> tuple[float, str]:
    try:
        if text.endswith("s"):
            value, unit = float(text[:-1]), "s"
        else:
            value, unit = float(int(text)), "n"
    except ValueError:
        raise ValueError(
            f"{flag} {text!r}: use 'auto', seconds like '10s' or a request count like '20'"
        ) from None
    if value < 0 or not math.isfinite(value):
        raise ValueError(f"{flag} must not be negative")
    return value, unit


def _finish(r: RequestRecord) -> float:
    """When a request left the system: its end, else when it was sent or scheduled."""
    if r.end is not None:
        return r.end
    return r.sent if r.sent is not None else r.scheduled


def _auto_window(
    records: Sequence[RequestRecord], target: int | None, t0: float, t1: float
) -> tuple[float, float, str]:
    if target is None or target <= 0:
        # Open loop: steady once one typical latency has passed after arrivals start,
        # until arrivals stop (after that the system only drains).
        lat = sorted(_finish(r) - r.scheduled for r in records)
        fill = lat[len(lat) // 2] if lat else 0.0
        last_arrival = max(r.scheduled for r in records)
        start = t0 + fill
        if last_arrival <= start:
            return t0, t1, "all (auto: run too short for a steady state)"
        return start, last_arrival, "auto (open loop: filled to last arrival)"
    # Closed loop: count requests in flight from intended send to finish. A freed slot
    # is refilled microseconds later, so momentary dips are ignored: the window runs
    # from the first time the target is reached to the final drop below it.
    events: list[tuple[float, int]] = []
    for r in records:
        events.append((r.scheduled, 1))
        events.append((_finish(r), -1))
    events.sort()  # at equal times, a finish counts before a send
    level = 0
    first_at: float | None = None
    last_at_target_drop: float | None = None
    at_target = False
    for t, delta in events:
        level += delta
        if level >= target:
            if first_at is None:
                first_at = t
            at_target = True
        elif at_target:
            last_at_target_drop = t
            at_target = False
    if first_at is None or last_at_target_drop is None or last_at_target_drop <= first_at:
        return t0, t1, f"all (auto: in-flight never held the target {target})"
    return first_at, last_at_target_drop, f"auto (in flight at target {target})"


def request_metric(r: RequestRecord, name: str) -> float | None:
    """One request's value of an SLO metric (seconds), or None if not defined."""
    if name == "itl":
        return r.itl_mean
    value: float | None = getattr(r, name)
    return value


def _parse_slo_key(key: str) -> tuple[str, str]:
    metric, _, stat = key.rpartition("_")
    if metric in SLO_METRICS and stat in _SLO_STATS:
        return metric, stat
    if key in SLO_METRICS:
        return key, "max"
    raise ValueError(
        f"unknown SLO {key!r}: use <metric>_<stat> with metric in {', '.join(SLO_METRICS)} "
        f"and stat in {', '.join(_SLO_STATS)}"
    )


def meets_slo(r: RequestRecord, slo: dict[str, float]) -> bool:
    """True when a successful request is within every SLO threshold.

    A per-request check uses each SLO's threshold on the request's own value (the
    percentile only matters for the level-wide verdict). A metric a request does not
    have (TPOT of a one-token answer) does not fail it.
    """
    if not r.ok:
        return False
    for key, limit in slo.items():
        value = request_metric(r, _parse_slo_key(key)[0])
        if value is not None and value > limit:
            return False
    return True


def aggregate(
    records: Iterable[RequestRecord],
    *,
    window: Window | None = None,
    slo: dict[str, float] | None = None,
    target_concurrency: int | None = None,
    target_rate: float | None = None,
    loadgen_cpu_percent: float | None = None,
    check_lag: bool = True,
) -> dict[str, Any]:
    """Aggregate one load level's records (see ``core/metrics`` in contracts.md s.4).

    ``loadgen_cpu_percent`` is the load generator's CPU, in percent of one core, for
    its busiest worker process during the level; above 90 the level is client-limited.
    ``check_lag=False`` leaves schedule lag out of the client-limited flag, for a level
    that sends everything at once (its lag is the time to send them all, by design).
    """
    # A fixed order makes the result independent of how records were merged from
    # worker processes (floating-point sums depend on the order of their terms).
    recs = sorted(records, key=lambda r: (r.scheduled, r.request_id))
    slo = dict(slo or {})
    for key in slo:
        _parse_slo_key(key)  # fail early on a bad key
    out: dict[str, Any] = {
        "target": {"concurrency": target_concurrency, "rate": target_rate},
        "slo": None,
    }
    if not recs:
        start = end = 0.0
        method = "empty"
    else:
        start, end, method = (window or Window()).resolve(recs, target_concurrency)
    out["window"] = {"start": start, "end": end, "method": method}
    span = max(end - start, 0.0)
    inw = [r for r in recs if start < _finish(r) <= end] if recs else []
    ok_in = [r for r in inw if r.ok]
    n_ok = sum(1 for r in recs if r.ok)
    n_cancel = sum(1 for r in recs if r.cancelled and not r.ok)
    n_err = len(recs) - n_ok - n_cancel
    out["requests"] = {
        "total": len(recs),
        "ok": n_ok,
        "errors": n_err,
        "cancelled": n_cancel,
        "in_window": len(inw),
    }
    out["success_rate"] = n_ok / (n_ok + n_err) if n_ok + n_err else None
    out_tokens = sum(r.output_tokens for r in ok_in)
    out["request_throughput"] = len(ok_in) / span if span > 0 else None
    out["output_token_throughput"] = out_tokens / span if span > 0 else None
    if slo:
        good = [r for r in ok_in if meets_slo(r, slo)]
        out["goodput"] = len(good) / span if span > 0 else None
    else:
        out["goodput"] = None

    def pick(name: str) -> list[float]:
        vals = (getattr(r, name) for r in ok_in)
        return [v for v in vals if v is not None]

    for name in ("ttft", "ttft_from_sent", "e2e", "e2e_from_sent", "tpot"):
        out[name] = summarize(pick(name))
    gaps: list[float] = []
    weights: list[int] = []
    for r in ok_in:
        ct, tk = r.chunk_times, r.chunk_tokens
        for i in range(1, len(ct)):
            gaps.append(ct[i] - ct[i - 1])
            weights.append(max(tk[i], 1) if i < len(tk) else 1)
    out["itl"] = summarize(gaps, weights)
    out["itl_per_request"] = summarize(pick("itl_mean"))
    out["schedule_lag"] = summarize([r.schedule_lag for r in inw if r.schedule_lag is not None])
    out["queue_delay"] = summarize([r.queue_delay for r in inw if r.queue_delay is not None])
    errors: dict[str, dict[str, Any]] = {}
    for r in sorted(recs, key=lambda r: r.scheduled):
        if r.ok or (r.cancelled and not r.error):
            continue
        kind = r.error or ("Cancelled" if r.cancelled else "Unknown")
        if kind == "Cancelled":
            continue
        entry = errors.setdefault(kind, {"count": 0, "example": r.error_message})
        entry["count"] += 1
    out["errors_by_type"] = errors
    out["tokens"] = {
        "prompt": sum(r.prompt_tokens or 0 for r in inw),
        "output": sum(r.output_tokens for r in inw),
        "estimated_requests": sum(1 for r in inw if r.tokens_estimated),
        "usage_mismatch_requests": sum(1 for r in inw if r.usage_mismatch),
    }
    out["achieved_rate"], scheduled_rate = _rates(recs, target_concurrency, out)
    if slo:
        out["slo"] = _slo_verdict(out, slo)
    reasons: list[str] = []
    lag99 = out["schedule_lag"]["p99"]
    if check_lag and lag99 is not None and lag99 > LAG_P99_LIMIT:
        reasons.append(f"schedule lag p99 {lag99 * 1e3:.1f} ms > {LAG_P99_LIMIT * 1e3:.0f} ms")
    if loadgen_cpu_percent is not None and loadgen_cpu_percent > CLIENT_CPU_LIMIT:
        reasons.append(
            f"load generator CPU {loadgen_cpu_percent:.0f}% of a core "
            f"> {CLIENT_CPU_LIMIT:.0f}% per worker"
        )
    achieved = out["achieved_rate"]
    if scheduled_rate and achieved is not None and achieved < RATE_RATIO_LIMIT * scheduled_rate:
        reasons.append(
            f"achieved rate {achieved:.2f}/s < {RATE_RATIO_LIMIT:.0%} of "
            f"scheduled {scheduled_rate:.2f}/s"
        )
    out["loadgen_cpu_percent"] = loadgen_cpu_percent
    out["client_limited"] = {"flag": bool(reasons), "reasons": reasons}
    return out


def _rates(
    recs: Sequence[RequestRecord], target_concurrency: int | None, out: dict[str, Any]
) -> tuple[float | None, float | None]:
    """Achieved send rate, and the rate the schedule asked for (open loop only).

    The schedule's own rate is used as the reference, not the nominal target: a short
    Poisson schedule's realised rate differs from its mean by chance, not by fault.
    """
    sent = sorted(r.sent for r in recs if r.sent is not None)
    if target_concurrency is not None or len(sent) < 2:
        return out["request_throughput"], None
    sched = sorted(r.scheduled for r in recs if r.sent is not None)
    sent_span, sched_span = sent[-1] - sent[0], sched[-1] - sched[0]
    achieved = (len(sent) - 1) / sent_span if sent_span > 0 else None
    scheduled = (len(sched) - 1) / sched_span if sched_span > 0 else None
    return achieved, scheduled


def _slo_verdict(out: dict[str, Any], slo: dict[str, float]) -> dict[str, Any]:
    """Level-wide check of each SLO on the aggregate (e.g. TTFT p99 <= 0.5 s)."""
    checks: dict[str, Any] = {}
    for key, limit in slo.items():
        metric, stat = _parse_slo_key(key)
        summary_name = "itl_per_request" if metric == "itl" else metric
        value = out[summary_name][stat]
        checks[key] = {"limit": limit, "value": value, "met": value is not None and value <= limit}
    met = all(c["met"] for c in checks.values()) and out["requests"]["ok"] > 0
    return {"met": met, "checks": checks}
