"""Verdict ids in output order; the Verdict models themselves live in ``core.verdicts``
(a RunResult stores them, and readers such as the report need no diagnose import)."""

from __future__ import annotations

from infersight.core.verdicts import Evidence, Verdict, VerdictWindow

__all__ = ["VERDICT_IDS", "Evidence", "Verdict", "VerdictWindow"]

#: Every verdict id, in the order outputs list them (most actionable first).
VERDICT_IDS: tuple[str, ...] = (
    "client_limited",
    "memory_pressure",
    "error_driven",
    "overloaded",
    "load_imbalance",
    "kv_bound",
    "slot_bound",
    "capacity",
    "host_starved",
    "busy_illusion",
    "under_loaded",
    "compute_bound_prefill",
    "bandwidth_bound_decode",
    "healthy",
)
