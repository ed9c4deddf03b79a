"""The "overloaded (unsustainable rate)" verdict (docs/design.md section 5).

An open-loop level is overloaded when bench judged it unsustainable (docs/design.md
section 2): the server completed fewer requests than were offered, or the number in
flight grew through the window. Its latency percentiles then measure how long the
level ran, not the server, and its achieved rate is an estimate of capacity. The
limiter verdicts (slot-, KV- or capacity-bound) say *why* the server cannot keep up.
"""

from __future__ import annotations

import math
from typing import Any

from infersight.core.verdicts import Verdict, is_marginal
from infersight.diagnose.rules.base import RuleInput, evidence, fmt, make_verdict, rq_evidence
from infersight.stats.sustain import SHORTFALL_LIMIT

__all__ = ["overloaded"]

_SOURCE = "level {level}: completions against the offered rate"


def overloaded(ri: RuleInput) -> Verdict | None:
    sus: Any = ri.agg.get("sustainability") if isinstance(ri.agg, dict) else None
    if not isinstance(sus, dict) or not sus.get("judged") or sus.get("sustainable") is not False:
        return None
    offered, cap = sus.get("offered_rate"), sus.get("capacity_estimate")
    slope = sus.get("inflight_slope")
    src = _SOURCE.format(level=ri.level)
    ev = [
        evidence("offered_rate", "offered rate", offered, "req/s", src),
        evidence("capacity_estimate", "achieved rate (capacity estimate)", cap, "req/s", src),
        evidence(
            "completion_ratio", "completed / offered", sus.get("completion_ratio"), "fraction", src
        ),
        evidence(
            "queue_growth",
            "queue growth (in flight)",
            slope,
            "req/s",
            src + ", least-squares slope",
        ),
    ]
    ci = sus.get("inflight_slope_ci")
    if isinstance(ci, list) and len(ci) == 2:
        ev.append(
            evidence(
                "queue_growth_ci",
                "queue growth 95% CI",
                f"{ci[0]:.3g} to {ci[1]:.3g}",
                "req/s",
                src,
            )
        )
    reasons = [str(r) for r in sus.get("reasons") or []]
    ev += [evidence("reason", "reason", r, "", src) for r in reasons]
    ev += rq_evidence(ri)
    # Say only what the test found (docs/design.md s.5: no text contradicts its numbers).
    why = []
    ratio = sus.get("completion_ratio")
    short = any(r.startswith("answered") for r in reasons)
    if short and isinstance(ratio, int | float):
        why.append(f"it answered {ratio:.0%} of the requests offered")
    if any(r.startswith("in flight grew") for r in reasons) and slope is not None:
        why.append(f"the requests in flight grew by {slope:.3g} per second")
    summary = (
        f"Offered {fmt(offered, 1)} req/s, the server completed {fmt(cap, 1)} req/s"
        f"{' (' + '; '.join(why) + ')' if why else ''}: this rate is unsustainable, so its "
        "latency percentiles grow with the level's duration and describe the run, not the "
        f"server. The server's capacity is about {fmt(cap, 1)} req/s; the queueing verdicts "
        "say what limits it."
    )
    marginal = (
        short
        and len(why) == 1
        and isinstance(ratio, int | float)
        and is_marginal(1 - ratio, SHORTFALL_LIMIT)
    )
    return make_verdict(
        ri,
        "overloaded",
        "Overloaded (unsustainable rate)",
        summary,
        ev,
        0.9,
        _fixes(offered, cap),
        marginal=marginal,
    )


def _fixes(offered: float | None, cap: float | None) -> list[str]:
    fixes = []
    if offered and cap and cap > 0:
        fixes.append(
            f"offer at most about {0.8 * cap:.3g} req/s per replica (80% of the measured "
            f"capacity), or run {math.ceil(offered / (0.8 * cap))} replicas for {offered:.3g} req/s"
        )
    fixes += [
        "shed or shape load before the server: a gateway with a bounded queue and a "
        "deadline answers 429/503 with Retry-After instead of queueing without limit",
        "find the highest sustainable rate that meets your SLO: infersight bench "
        "--find-max --slo 'ttft_p99<...'",
        "raise the server's capacity: see the slot-, KV- or capacity-bound verdict for the limit",
    ]
    return fixes
