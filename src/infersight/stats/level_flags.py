"""What every output says beside a level's figures (docs/design.md section 2).

- the client-limited flag, relative to the level's own latency, and the headline a
  flagged run starts with (naming the contention when the server shares the client's
  cores);
- the notes that say which requests the statistics cover and whether an open-loop
  level was sustainable.

The console table, the JSON, the CSV, the HTML report and the Markdown all take their
words from here, so they never disagree.
"""

from __future__ import annotations

from typing import Any

from infersight.core.records import RunResult
from infersight.core.verdicts import is_marginal
from infersight.stats.replay_stats import replay_notes
from infersight.stats.validity import validity_lines

__all__ = [
    "CLIENT_CPU_LIMIT",
    "LAG_P99_LIMIT",
    "RATE_RATIO_LIMIT",
    "client_headline",
    "client_limited",
    "flagged",
    "level_notes",
    "level_state",
    "over_limit",
]

#: Client-limited thresholds (docs/design.md section 2).
LAG_P99_LIMIT = 0.005
#: ... or this fraction of TTFT p50, whichever is larger.
LAG_TTFT_FRACTION = 0.01
CLIENT_CPU_LIMIT = 90.0  # percent of one core, per worker
RATE_RATIO_LIMIT = 0.95


def over_limit(value: float, limit: float, unit: str, *, nd: int = 1, scale: float = 1.0) -> str:
    """``"5.04 ms > 5.00 ms"``: a value over its limit, shown with the fewest decimals
    (``nd`` to ``nd + 2``) that tell the two apart, since "5.0 ms > 5.0 ms" reads as
    a bug. Closer than that, the shown values are equal and the sign says so."""
    for d in range(nd, nd + 3):
        a, b = f"{value * scale:.{d}f}", f"{limit * scale:.{d}f}"
        if a != b:
            return f"{a}{unit} > {b}{unit}"
    return f"{a}{unit} ≥ {b}{unit}"


def client_limited(
    agg: dict[str, Any],
    scheduled_rate: float | None,
    loadgen_cpu_percent: float | None,
    *,
    check_lag: bool = True,
    contention: str | None = None,
    workers: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The client-limited flag of a level (docs/design.md section 2), relative to the level.

    Schedule lag only matters against the latency it distorts: it is flagged above
    max(5 ms, 1% of TTFT p50). When the server shares the client's cores, the reasons
    say so: the two compete for the same CPUs, which is not a starved client alone.
    ``workers`` (``{"worker", "host", "lag_p99", "cpu_percent"}`` each) judges every
    load-generator worker on its own figures; the flag's ``workers`` entry keeps them.
    """
    reasons: list[str] = []
    #: Per reason: whether it clears its limit by less than 20% (docs/design.md s.5).
    marginal: list[bool] = []
    lag99 = agg["schedule_lag"]["p99"]
    ttft50 = agg["ttft"]["p50"]
    lag_limit = max(LAG_P99_LIMIT, LAG_TTFT_FRACTION * (ttft50 or 0.0))
    if check_lag and lag99 is not None and lag99 > lag_limit:
        reasons.append(
            f"schedule lag p99 {over_limit(lag99, lag_limit, ' ms', scale=1e3)} "
            f"(the larger of {LAG_P99_LIMIT * 1e3:.0f} ms and {LAG_TTFT_FRACTION:.0%} of TTFT p50)"
        )
        marginal.append(is_marginal(lag99, lag_limit))
    per_worker = None if workers is None else _judge_workers(workers, lag_limit, check_lag)
    if per_worker is not None:
        reasons += [r for w in per_worker for r in w["reasons"]]
        marginal += [m for w in per_worker for m in w["marginal"]]
    elif loadgen_cpu_percent is not None and loadgen_cpu_percent > CLIENT_CPU_LIMIT:
        reasons.append(
            f"load generator CPU "
            f"{over_limit(loadgen_cpu_percent, CLIENT_CPU_LIMIT, '% of a core', nd=0)} per worker"
        )
        marginal.append(is_marginal(loadgen_cpu_percent, CLIENT_CPU_LIMIT))
    achieved = agg["achieved_rate"]
    if scheduled_rate and achieved is not None and achieved < RATE_RATIO_LIMIT * scheduled_rate:
        reasons.append(
            f"achieved send rate {achieved:.2f}/s < {RATE_RATIO_LIMIT:.0%} of "
            f"scheduled {scheduled_rate:.2f}/s"
        )
        # the flag is on the shortfall: 5% allowed, marginal below 6%
        marginal.append(is_marginal(1 - achieved / scheduled_rate, 1 - RATE_RATIO_LIMIT))
    if reasons and contention:
        # Both sides slow each other down: name the contention, not the client alone.
        reasons = [f"{r}, while {contention} (contention, not the client alone)" for r in reasons]
    out: dict[str, Any] = {
        "flag": bool(reasons),
        "reasons": reasons,
        # every reason within 20% of its limit: shown as marginal, never the headline
        "marginal": bool(reasons) and all(marginal),
        "lag_limit": lag_limit,
        "contention": contention,
    }
    if per_worker is not None:
        out["workers"] = per_worker
    return out


def _judge_workers(
    workers: list[dict[str, Any]], lag_limit: float, check_lag: bool
) -> list[dict[str, Any]]:
    """Each worker against the limits on its own lag and CPU, named in its reasons."""
    out = []
    for w in workers:
        who = f"worker {w['worker']}" + (f" on {w['host']}" if w.get("host") else "")
        lag, cpu = w.get("lag_p99"), w.get("cpu_percent")
        reasons, marginal = [], []
        if check_lag and lag is not None and lag > lag_limit:
            lag_text = over_limit(lag, lag_limit, " ms", scale=1e3)
            reasons.append(f"{who}: schedule lag p99 {lag_text}")
            marginal.append(is_marginal(lag, lag_limit))
        if cpu is not None and cpu > CLIENT_CPU_LIMIT:
            cpu_text = over_limit(cpu, CLIENT_CPU_LIMIT, "% of a core", nd=0)
            reasons.append(f"{who}: load generator CPU {cpu_text}")
            marginal.append(is_marginal(cpu, CLIENT_CPU_LIMIT))
        out.append({**w, "flag": bool(reasons), "reasons": reasons, "marginal": marginal})
    return out


def client_headline(result: RunResult) -> tuple[str, str] | None:
    """``(label, text)`` of the line every output of a flagged run starts with.

    When the server under test shared the client's cores, the label names the
    contention instead of blaming the client alone (docs/design.md section 2).
    """
    if not result.client_limited:
        return None
    reasons = "; ".join(result.client_limited_reasons) or "see the schedule lag"
    if marginal_run(result):
        return (
            "CLIENT-LIMITED (MARGINAL)",
            f"every flag clears its limit by less than 20% ({reasons}); the figures are "
            "very likely the server's, but rerun with more --workers to be sure",
        )
    contention = result.environment.get("cpu_contention")
    if contention:
        # Each level's reason ends by naming the contention: the line names it once.
        reasons = reasons.replace(f", while {contention} (contention, not the client alone)", "")
        return (
            "CLIENT AND SERVER SHARE CORES",
            f"{contention} and compete for them, so the schedule slipped ({reasons}); "
            "run the load generator on another host to measure the server alone",
        )
    return (
        "CLIENT-LIMITED",
        f"the load generator, not the server, may have limited these numbers: {reasons}",
    )


def flagged(agg: dict[str, Any]) -> bool:
    """Whether a level's client-limited flag is set and more than marginal."""
    cl = agg.get("client_limited") or {}
    return bool(cl.get("flag")) and not cl.get("marginal")


def marginal_run(result: RunResult) -> bool:
    """A client-limited run whose every flagged level is only marginally flagged."""
    levels = [
        a.get("client_limited") or {} for a in result.aggregates.values() if isinstance(a, dict)
    ]
    hit = [cl for cl in levels if cl.get("flag")]
    return bool(hit) and all(cl.get("marginal") for cl in hit)


def level_state(agg: dict[str, Any]) -> str:
    """The level's state in one word or two: "unsustainable", "steady" (a steady-state
    window), "no steady state" (too few requests: all counted) or "all requests"."""
    sus = agg.get("sustainability") or {}
    if sus.get("judged") and sus.get("sustainable") is False:
        return "unsustainable"
    w = agg.get("window") or {}
    if w.get("steady"):
        return "steady"
    return "no steady state" if w.get("note") else "all requests"


def level_notes(name: str, agg: dict[str, Any]) -> list[tuple[str, str]]:
    """``(kind, text)`` lines that say what a level's figures cover, for every output.

    ``kind`` is "invalid" (a failed validity check, :mod:`infersight.stats.validity`),
    "unsustainable" (the level could not keep up with its rate: its
    latency percentiles grow with its duration), "no_steady_state" (every request of
    the level counts) or "window" (the statistics cover fewer requests than were sent);
    then a replay's fidelity, the prefix sharing and cache hit rate, and TTFT by
    conversation turn, where the level has them (:func:`replay_notes`).
    """
    out: list[tuple[str, str]] = []
    sus = agg.get("sustainability") or {}
    if sus.get("judged") and sus.get("sustainable") is False:
        cap = sus.get("capacity_estimate")
        cap_txt = "-" if cap is None else f"{cap:.3g}"
        out.append(
            (
                "unsustainable",
                f"{name} is unsustainable: {'; '.join(sus.get('reasons') or [])}. Capacity ≈ "
                f"{cap_txt} req/s (the rate it completed); its latency percentiles grow with "
                "the level's duration and are not a property of the server",
            )
        )
    req, w = agg.get("requests") or {}, agg.get("window") or {}
    if w.get("note"):
        out.append(("no_steady_state", f"{name}: {w['note']}"))
    elif req.get("in_window") is not None and req.get("in_window") != req.get("total"):
        tp = (agg.get("basis") or {}).get("throughput") or {}
        span = tp.get("span_s")
        out.append(
            (
                "window",
                f"{name}: latency over the {req['in_window']} of {req.get('total')} requests sent "
                f"in the window ({w.get('method')}); throughput over "
                f"{'-' if span is None else f'{span:.1f}'} s ({tp.get('completions', '-')} "
                "completions, until the window's requests drained)",
            )
        )
    out.extend(replay_notes(name, agg))
    out.extend(("invalid", f"⚠ {text}") for text in validity_lines(name, agg))
    return out
