"""Whether a level's figures can be trusted (docs/design.md section 2, "Validity").

Each check is a pure function of the level's records (and the aggregate the records
gave): it says what it measured, its tolerance, whether the level is within it, and
which metrics it invalidates when not. :func:`check_level` runs them all; bench puts
the list in each aggregate as ``validity`` and the report recomputes it for files
written before it existed. ``report A B`` never calls a difference on a metric that
either run marks invalid (:func:`invalid_metrics`).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from infersight.core.records import RequestRecord

__all__ = [
    "LATENCIES",
    "check_chunks",
    "check_e2e",
    "check_errors",
    "check_level",
    "check_rate",
    "check_tokens",
    "check_trend",
    "invalid_metrics",
    "mann_kendall",
    "validity_lines",
]

#: Every latency metric of an aggregate.
LATENCIES = ("ttft", "ttft_from_sent", "e2e", "e2e_from_sent", "tpot", "itl")
_TOKENS_TOL = 0.02
_E2E_TOL = 0.05
_CHUNK_TOL = 1.2
_RATE_TOL = 0.95
_ERROR_TOL = 0.01
_TREND_P = 0.01
_TREND_SLOPE = 0.10
#: Sen's slope is quadratic in the points: thin longer levels evenly to this many.
_SEN_POINTS = 400


def _check(
    name: str,
    ok: bool,
    value: float | None,
    tolerance: str,
    invalidates: Sequence[str],
    detail: str,
) -> dict[str, Any]:
    return {
        "check": name,
        "ok": ok,
        "value": value,
        "tolerance": tolerance,
        "invalidates": [] if ok else list(invalidates),
        "detail": detail,
    }


def _streamed(ok: Sequence[RequestRecord]) -> list[RequestRecord]:
    """Complete streamed answers of two chunks or more (the ones ITL describes)."""
    return [r for r in ok if len(r.chunk_times) >= 2]


def check_tokens(ok: Sequence[RequestRecord]) -> dict[str, Any]:
    """The server's usage against the tokens counted in the stream (±2%)."""
    both = [r for r in _streamed(ok) if not r.tokens_estimated and r.completion_tokens is not None]
    counted = sum(sum(r.chunk_tokens) for r in both)
    if not both or counted == 0:
        return _check("tokens", True, None, "±2%", [], "no usage to check against the stream")
    usage = sum(r.completion_tokens or 0 for r in both)
    gap = usage / counted - 1.0
    return _check(
        "tokens",
        abs(gap) <= _TOKENS_TOL,
        gap,
        "±2%",
        ["output_token_throughput", "tpot"],
        f"usage reports {usage} tokens, the stream carried {counted} ({gap:+.1%})",
    )


def check_e2e(ok: Sequence[RequestRecord]) -> dict[str, Any]:
    """e2e p50 against TTFT + ITL·(n−1) p50, with n the tokens of each answer (±5%)."""
    pairs = [
        (r.e2e, r.ttft + r.itl_mean * (r.output_tokens - 1))
        for r in _streamed(ok)
        if r.e2e and r.ttft is not None and r.itl_mean is not None and r.output_tokens >= 1
    ]
    if not pairs:
        return _check("e2e", True, None, "±5% p50", [], "no streamed answers")
    e2e = statistics.median(p[0] for p in pairs)
    pred = statistics.median(p[1] for p in pairs)
    gap = pred / e2e - 1.0 if e2e > 0 else 0.0
    return _check(
        "e2e",
        abs(gap) <= _E2E_TOL,
        gap,
        "±5% p50",
        ["itl", "tpot"],
        f"TTFT + ITL·(n−1) p50 is {gap:+.1%} off e2e p50",
    )


def check_chunks(ok: Sequence[RequestRecord]) -> dict[str, Any]:
    """Mean tokens per content chunk (≤ 1.2): above it ITL is a gap between chunks,
    not between tokens."""
    recs = _streamed(ok)
    if not recs:
        return _check("tokens_per_chunk", True, None, "mean ≤ 1.2", [], "no streamed answers")
    mean = statistics.fmean(r.output_tokens / len(r.chunk_times) for r in recs)
    return _check(
        "tokens_per_chunk",
        mean <= _CHUNK_TOL,
        mean,
        "mean ≤ 1.2",
        ["itl"],
        f"{mean:.2f} tokens per chunk on average",
    )


def check_rate(recs: Sequence[RequestRecord], open_loop: bool) -> dict[str, Any]:
    """Achieved send rate against the rate the schedule asked for (open loop, ≥ 95%).

    The schedule's own rate is the reference: a short Poisson schedule's rate differs
    from its mean by chance, not by the client's fault.
    """
    pairs = sorted((r.scheduled, r.sent) for r in recs if r.sent is not None)
    if not open_loop or len(pairs) < 3:
        return _check("rate", True, None, "≥ 95%", [], "closed loop: no rate asked for")
    sent = sorted(p[1] for p in pairs)
    sched_span, sent_span = pairs[-1][0] - pairs[0][0], sent[-1] - sent[0]
    if sched_span <= 0 or sent_span <= 0:
        return _check("rate", True, None, "≥ 95%", [], "every request scheduled at once")
    ratio = sched_span / sent_span  # (n-1)/sent_span over (n-1)/sched_span
    return _check(
        "rate",
        ratio >= _RATE_TOL,
        ratio,
        "≥ 95%",
        LATENCIES,
        f"achieved {ratio:.0%} of the scheduled send rate",
    )


def check_client(agg: dict[str, Any]) -> dict[str, Any]:
    """The client-limited flag (docs/design.md section 2)."""
    cl = agg.get("client_limited") or {}
    flag = bool(cl.get("flag"))
    return _check(
        "client_limited",
        not flag,
        float(flag),
        "the client-limited flag",
        LATENCIES,
        "; ".join(cl.get("reasons") or []) or "the load generator kept up",
    )


def check_errors(recs: Sequence[RequestRecord]) -> dict[str, Any]:
    """The share of failed requests (≤ 1%); percentiles cover successes only."""
    n_ok = sum(1 for r in recs if r.ok)
    n_err = sum(1 for r in recs if not r.ok and not r.cancelled)
    share = n_err / (n_ok + n_err) if n_ok + n_err else 0.0
    return _check(
        "errors",
        share <= _ERROR_TOL,
        share,
        "≤ 1%",
        ["goodput"],
        f"{share:.1%} of requests failed; percentiles are over successes only",
    )


def check_warmup(agg: dict[str, Any]) -> dict[str, Any]:
    """Whether the window excluded warm-up (said, never a fault: short levels keep all)."""
    w = agg.get("window") or {}
    steady = bool(w.get("steady"))
    text = (
        "the window excluded warm-up"
        if steady
        else (w.get("note") or "the window counts every request, warm-up included")
    )
    return _check("warmup", True, float(steady), "said", [], str(text))


def mann_kendall(times: Sequence[float], values: Sequence[float]) -> tuple[float, float]:
    """(p-value of a monotonic trend, Sen's slope per second) of ``values`` over ``times``."""
    # Only where a level is judged: scipy.stats takes ~1.3 s and tens of MiB to import.
    import numpy as np
    from scipy import stats

    tau = stats.kendalltau(times, values)
    step = max(1, len(times) // _SEN_POINTS)
    # Only the slope is read: with many tied values the interval's variance comes
    # out negative, and numpy's warning about its square root says nothing here.
    with np.errstate(invalid="ignore"):
        slope = stats.theilslopes(values[::step], times[::step])[0]
    p = float(tau.pvalue)
    return (1.0 if p != p else p), float(slope)


def check_trend(ok: Sequence[RequestRecord]) -> dict[str, Any]:
    """Mann-Kendall trend of TTFT and e2e across the window (p > 0.01, or Sen's slope
    over the window under 10% of the mean)."""
    recs = sorted(
        (r for r in ok if r.ttft is not None and r.e2e is not None), key=lambda r: r.scheduled
    )
    tol = "p > 0.01 or drift < 10% of mean"
    if len(recs) < 10:
        return _check("stationarity", True, None, tol, [], "too few requests to test")
    t = [r.scheduled for r in recs]
    span = t[-1] - t[0]
    if span <= 0:
        return _check("stationarity", True, None, tol, [], "every request scheduled at once")
    worst: tuple[float, str] = (0.0, "no trend")
    bad = False
    for name in ("ttft", "e2e"):
        vals = [float(getattr(r, name)) for r in recs]
        mean = statistics.fmean(vals)
        p, slope = mann_kendall(t, vals)
        drift = abs(slope) * span / mean if mean > 0 else 0.0
        if p <= _TREND_P and drift >= _TREND_SLOPE:
            bad = True
        if drift >= worst[0]:
            worst = (
                drift,
                f"{name} drifts {slope * span:+.3g} s across the window "
                f"({drift:.0%} of its mean, Mann-Kendall p = {p:.2g})",
            )
    return _check("stationarity", not bad, worst[0], tol, LATENCIES, worst[1])


def check_level(
    records: Sequence[RequestRecord],
    members: Sequence[RequestRecord],
    agg: dict[str, Any],
) -> list[dict[str, Any]]:
    """Every check of one level: ``records`` all its requests, ``members`` its window's,
    ``agg`` its aggregate (for the target, the window and the client-limited flag)."""
    ok = [r for r in members if r.ok]
    target = agg.get("target") or {}
    open_loop = target.get("concurrency") is None and bool(target.get("rate"))
    return [
        check_tokens(ok),
        check_e2e(ok),
        check_chunks(ok),
        check_rate(records, open_loop),
        check_client(agg),
        check_errors(records),
        check_warmup(agg),
        check_trend(ok),
    ]


def invalid_metrics(agg: dict[str, Any]) -> dict[str, str]:
    """Metric -> why it is invalid, from a level's ``validity`` (empty when none)."""
    out: dict[str, str] = {}
    for c in agg.get("validity") or []:
        for m in c.get("invalidates") or []:
            out.setdefault(m, f"{c['check']}: {c.get('detail', '')}")
    return out


def validity_lines(name: str, agg: dict[str, Any]) -> list[str]:
    """One line per failed check of a level, for the console and the HTML report."""
    return [
        f"{name} invalid {c['check']} ({c['tolerance']}): {c.get('detail', '')}; "
        f"not valid: {', '.join(c['invalidates'])}"
        for c in agg.get("validity") or []
        if not c.get("ok")
    ]
