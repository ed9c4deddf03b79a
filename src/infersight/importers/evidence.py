"""What ``diagnose`` cannot decide from a file of aggregates alone, as one verdict per
level (docs/design.md section 10).

The rules of section 5 read request records (schedule lag, requests in flight over
time, error kinds) and engine telemetry; an imported summary has neither, so
``diagnose`` finds no window to judge. Rather than print nothing (or "healthy"), each
level gets an ``undecided`` verdict: the evidence the file does hold, which is
missing, the verdicts that could not be decided, and how to keep the timings next
time.
"""

from __future__ import annotations

from typing import Any

from infersight.core.records import RunResult
from infersight.core.verdicts import Evidence, Verdict, VerdictWindow

__all__ = ["missing_evidence"]

#: The id of the verdict this module gives.
UNDECIDED = "undecided"

#: Verdicts that need request records, and what of them each reads.
_NEED_REQUESTS = (
    "client-limited (schedule lag per request)",
    "overloaded (requests in flight over time)",
    "slot-bound, capacity and compute-bound (the capacity curve: requests in flight per level)",
    "error-driven (each error's kind and origin)",
)
#: Verdicts that need engine or device telemetry, which no imported file holds.
_NEED_TELEMETRY = "KV-bound, memory pressure, host-starved, busy illusion, under-loaded"


def _value(agg: dict[str, Any], key: str, stat: str) -> float | None:
    s = agg.get(key)
    v = s.get(stat) if isinstance(s, dict) else None
    return float(v) if isinstance(v, int | float) else None


def missing_evidence(result: RunResult) -> list[Verdict]:
    """One ``undecided`` verdict per level of an imported run without requests; none
    for any other run (its rules decide)."""
    imported = result.config.get("imported")
    if not isinstance(imported, dict) or result.records:
        return []
    tool = str(imported.get("tool") or "the tool")
    missing = [str(m) for m in imported.get("missing") or []]
    hint = imported.get("rerun_hint")
    out = []
    for name, agg in result.aggregates.items():
        if not isinstance(agg, dict):
            continue
        ev = [Evidence(key="missing", name="missing", value="; ".join(missing), source=tool)]
        for key, stat, label, unit in (
            ("request_throughput", None, "throughput", "req/s"),
            ("ttft_from_sent", "p50", "TTFT p50 (from the send)", "s"),
            ("ttft_from_sent", "p99", "TTFT p99 (from the send)", "s"),
            ("tpot", "p50", "TPOT p50", "s"),
            ("e2e_from_sent", "p99", "e2e p99 (from the send)", "s"),
            ("success_rate", None, "success rate", "fraction"),
        ):
            v = agg.get(key) if stat is None else _value(agg, key, stat)
            if isinstance(v, int | float):
                ev.append(
                    Evidence(
                        name=label, value=float(v), unit=unit, source=f"{tool}'s own aggregates"
                    )
                )
        undecided = "; ".join(_NEED_REQUESTS)
        out.append(
            Verdict(
                id=UNDECIDED,
                title="Not decided: the file holds aggregates only",
                summary=(
                    f"{tool}'s file has this level's statistics but not its requests, so "
                    f"these could not be decided: {undecided}; and, needing engine "
                    f"telemetry no imported file has: {_NEED_TELEMETRY}."
                ),
                window=VerdictWindow(start=0.0, end=0.0),
                evidence=ev,
                confidence=0.0,
                fixes=[f"keep per-request timings: {hint}"] if hint else [],
                level=name,
            )
        )
    return out
