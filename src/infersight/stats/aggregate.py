"""Aggregates over request records (``docs/design.md`` section 2).

:func:`aggregate` turns the records of one load level into the numbers every output
shows. It is a pure function of the records, so a RunResult's aggregates can always be
recomputed, and records merged from several worker processes give the same answer as
one process would (the order of records never matters). Which requests count is the
window's business (:mod:`infersight.stats.windows`); whether an open-loop level is
sustainable is :mod:`infersight.stats.sustain`'s.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from infersight.core.errors import ConfigError
from infersight.core.records import RequestRecord
from infersight.stats.chunks import pooled_itl
from infersight.stats.level_flags import client_headline, client_limited, level_notes
from infersight.stats.prefix_cache import client_cache
from infersight.stats.summary import PERCENTILES, summarize
from infersight.stats.sustain import judge_sustainability
from infersight.stats.validity import check_level
from infersight.stats.windows import Window, finish_time

__all__ = [
    "SLO_METRICS",
    "Window",
    "aggregate",
    "client_headline",
    "level_notes",
    "meets_slo",
    "parse_slo_key",
]

#: Per-request metrics an SLO may name, e.g. ``ttft_p99``.
SLO_METRICS = ("ttft", "ttft_from_sent", "tpot", "itl", "e2e", "e2e_from_sent")
_SLO_STATS = (*PERCENTILES, "mean", "max")


def request_metric(r: RequestRecord, name: str) -> float | None:
    """One request's value of an SLO metric (seconds), or None if not defined."""
    if name == "itl":
        return r.itl_mean
    value: float | None = getattr(r, name)
    return value


def parse_slo_key(key: str) -> tuple[str, str]:
    """``ttft_p99`` -> ``("ttft", "p99")``; a bare metric (``e2e``) means its max."""
    metric, _, stat = key.rpartition("_")
    if metric in SLO_METRICS and stat in _SLO_STATS:
        return metric, stat
    if key in SLO_METRICS:
        return key, "max"
    raise ConfigError(
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
        value = request_metric(r, parse_slo_key(key)[0])
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
    contention: str | None = None,
    workers: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """Aggregate one load level's records (docs/design.md section 2).

    Latency statistics describe the window's requests (chosen by intended send time);
    throughput counts the completions inside the window's throughput span. An
    open-loop level at a finite ``target_rate`` is judged sustainable or not.

    ``loadgen_cpu_percent`` is the load generator's CPU, in percent of one core, for
    its busiest worker process during the level; above 90 the level is client-limited.
    ``check_lag=False`` leaves schedule lag out of the client-limited flag, for a level
    that sends everything at once (its lag is the time to send them all, by design).
    ``contention`` names the cores the client shares with the server under test, e.g.
    "the client and the embedded engine share 2 cores": a flagged level then says so.
    ``workers`` (label ``worker`` -> ``{"host", "cpu_percent"}``) judges the flag per
    worker as well: each worker's own schedule lag and CPU (load generators on hosts
    of their own, where one slow host hides in the merged figures).
    """
    # A fixed order makes the result independent of how records were merged from
    # worker processes (floating-point sums depend on the order of their terms).
    recs = sorted(records, key=lambda r: (r.scheduled, r.request_id))
    slo = dict(slo or {})
    for key in slo:
        parse_slo_key(key)  # fail early on a bad key
    lw = (window or Window()).resolve(recs, target_concurrency)
    members = lw.members
    ok_in = [r for r in members if r.ok]
    # Throughput: completions that happen inside [start, end + drain], whoever sent them.
    span_start, span_end = lw.start, lw.span_end
    span = max(span_end - span_start, 0.0)
    done = [r for r in recs if r.ok and span_start <= finish_time(r) <= span_end]
    out: dict[str, Any] = {
        "target": {"concurrency": target_concurrency, "rate": target_rate},
        "slo": None,
        "window": lw.describe(),
    }
    out.update(_counts(recs, members, ok_in, done))
    out.update(_throughput(done, span, slo))
    out.update(_latency(members, ok_in))
    out["errors_by_type"] = _errors(recs)
    out["tokens"] = _tokens(members)
    out["prefix_cache"] = {"client": client_cache(members)}
    out["basis"] = {
        "latency": {
            "window": lw.method,
            "steady": lw.steady,
            "requests": len(members),
            "ok": len(ok_in),
        },
        "throughput": {
            "span": [span_start, span_end],
            "span_s": span,
            "completions": len(done),
        },
    }
    open_loop = target_concurrency is None
    out["sustainability"] = judge_sustainability(recs, lw, target_rate if open_loop else None)
    out["achieved_rate"], scheduled_rate = _rates(recs, target_concurrency, out)
    if slo:
        out["slo"] = _slo_verdict(out, slo)
    out["loadgen_cpu_percent"] = loadgen_cpu_percent
    out["client_limited"] = client_limited(
        out,
        scheduled_rate,
        loadgen_cpu_percent,
        check_lag=check_lag,
        contention=contention,
        workers=None if workers is None else _worker_loads(members, workers),
    )
    out["validity"] = check_level(recs, members, out)
    return out


def _worker_loads(
    members: Sequence[RequestRecord], workers: Mapping[str, Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """Each worker's share of the window: its requests, schedule lag p99 and CPU."""
    out = []
    for name, info in workers.items():
        lags = [
            lag
            for r in members
            if r.labels.get("worker") == name and (lag := r.schedule_lag) is not None
        ]
        out.append(
            {
                "worker": name,
                "host": info.get("host"),
                "requests": len(lags),
                "lag_p99": summarize(lags)["p99"],
                "cpu_percent": info.get("cpu_percent"),
            }
        )
    return out


def _counts(
    recs: Sequence[RequestRecord],
    members: Sequence[RequestRecord],
    ok_in: Sequence[RequestRecord],
    done: Sequence[RequestRecord],
) -> dict[str, Any]:
    """Request counts and the success rate (cancelled requests are neither)."""
    n_ok = sum(1 for r in recs if r.ok)
    n_cancel = sum(1 for r in recs if r.cancelled and not r.ok)
    n_err = len(recs) - n_ok - n_cancel
    return {
        "requests": {
            "total": len(recs),
            "ok": n_ok,
            "errors": n_err,
            "cancelled": n_cancel,
            "in_window": len(members),
            "in_window_ok": len(ok_in),
            "completions_in_span": len(done),
        },
        "success_rate": n_ok / (n_ok + n_err) if n_ok + n_err else None,
    }


def _throughput(
    done: Sequence[RequestRecord], span: float, slo: dict[str, float]
) -> dict[str, float | None]:
    """Request, output-token and good (SLO-meeting) completions per second of the span."""
    if span <= 0:
        return {"request_throughput": None, "output_token_throughput": None, "goodput": None}
    return {
        "request_throughput": len(done) / span,
        "output_token_throughput": sum(r.output_tokens for r in done) / span,
        "goodput": sum(1 for r in done if meets_slo(r, slo)) / span if slo else None,
    }


def _tokens(members: Sequence[RequestRecord]) -> dict[str, int]:
    return {
        "prompt": sum(r.prompt_tokens or 0 for r in members),
        "output": sum(r.output_tokens for r in members),
        "estimated_requests": sum(1 for r in members if r.tokens_estimated),
        "usage_mismatch_requests": sum(1 for r in members if r.usage_mismatch),
    }


def _latency(members: Sequence[RequestRecord], ok_in: Sequence[RequestRecord]) -> dict[str, Any]:
    """Latency summaries over the window's requests.

    TTFT counts every request of the window that got a first token, even one whose
    stream later failed (its first token did arrive then); e2e, TPOT and ITL describe
    complete answers.
    """
    out: dict[str, Any] = {}

    def pick(recs: Sequence[RequestRecord], name: str) -> list[float]:
        vals = (getattr(r, name) for r in recs)
        return [v for v in vals if v is not None]

    for name in ("ttft", "ttft_from_sent"):
        out[name] = summarize(pick(members, name))
    for name in ("e2e", "e2e_from_sent", "tpot"):
        out[name] = summarize(pick(ok_in, name))
    out["itl"] = summarize(*pooled_itl(ok_in))
    out["itl_per_request"] = summarize(pick(ok_in, "itl_mean"))
    out["schedule_lag"] = summarize(pick(members, "schedule_lag"))
    out["queue_delay"] = summarize(pick(members, "queue_delay"))
    return out


def _errors(recs: Sequence[RequestRecord]) -> dict[str, dict[str, Any]]:
    errors: dict[str, dict[str, Any]] = {}
    for r in recs:
        if r.ok or (r.cancelled and not r.error):
            continue
        kind = r.error or ("Cancelled" if r.cancelled else "Unknown")
        if kind == "Cancelled":
            continue
        entry = errors.setdefault(kind, {"count": 0, "example": r.error_message})
        entry["count"] += 1
    return errors


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
        metric, stat = parse_slo_key(key)
        summary_name = "itl_per_request" if metric == "itl" else metric
        value = out[summary_name][stat]
        checks[key] = {"limit": limit, "value": value, "met": value is not None and value <= limit}
    met = all(c["met"] for c in checks.values()) and out["requests"]["ok"] > 0
    return {"met": met, "checks": checks}
