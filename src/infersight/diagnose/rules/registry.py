"""The diagnosis rules of docs/design.md section 5, evaluated on one window."""

from __future__ import annotations

from infersight.core.verdicts import Verdict
from infersight.diagnose.rules.base import RuleInput, evidence, fmt, make_verdict, rq_evidence
from infersight.diagnose.rules.cache import prefix_cache
from infersight.diagnose.rules.client import client_limited, error_driven
from infersight.diagnose.rules.device import (
    bandwidth_decode,
    busy_illusion,
    compute_prefill,
    host_starved,
)
from infersight.diagnose.rules.idle import under_loaded
from infersight.diagnose.rules.memory import memory_pressure
from infersight.diagnose.rules.overload import overloaded
from infersight.diagnose.rules.queue import queueing

__all__ = ["RULES", "RuleInput", "evaluate"]

RULES = (
    client_limited,
    memory_pressure,
    error_driven,
    overloaded,
    queueing,
    host_starved,
    busy_illusion,
    under_loaded,
    compute_prefill,
    bandwidth_decode,
    prefix_cache,
)


def evaluate(ri: RuleInput) -> list[Verdict]:
    """Every verdict that fires on this window, or one ``healthy`` verdict (also beside
    verdicts that are all marginal: those never stand for the window alone)."""
    out = [v for rule in RULES if (v := rule(ri)) is not None]
    if out and not all(v.marginal for v in out):
        return out
    s, w = ri.s, ri.w
    parts = [f"{w.n} requests, {w.n_failed} errors"]
    if s.R is not None:
        parts.append(f"R {fmt(s.R)}" + (f" of {s.S:.0f} slots" if s.S else ""))
    if s.Q is not None:
        parts.append(f"Q {fmt(s.Q)}")
    if s.itl_ratio is not None:
        parts.append(f"ITL {fmt(s.itl_ratio)}x floor")
    ev = [
        *rq_evidence(ri),
        evidence("device_busy", "device busy", s.busy, "fraction", s.busy_source),
    ]
    marginal = " beyond the marginal flags above" if out else ""
    return [
        *out,
        make_verdict(
            ri,
            "healthy",
            "Healthy",
            f"No limiter found{marginal}: " + ", ".join(parts) + ".",
            ev,
            0.7,
            [],
        ),
    ]
