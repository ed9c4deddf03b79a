"""Shared pieces of the diagnosis rules: thresholds, the rule input, evidence helpers."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from infersight.core.curve import CapacityCurve
from infersight.core.server_model import Fix
from infersight.core.verdicts import Evidence, Verdict, VerdictWindow
from infersight.diagnose.context import RunContext
from infersight.diagnose.signals import WindowStats
from infersight.diagnose.signals_engine import EngineSignals

__all__ = [
    "FixLine",
    "RuleInput",
    "busy_evidence",
    "evidence",
    "fmt",
    "loadgen_evidence",
    "make_verdict",
    "rq_evidence",
]

#: Thresholds (docs/design.md section 5); named so reports can cite them.
R_NEAR_S = 0.85
KV_FULL = 0.90
UNDER_R_OF_S = 0.25
BUSY_LOW = 0.50
SATURATED = 0.80
ERROR_RATE = 0.01
HOST_BUSY_MAX = 0.60
HOST_ITL_RATIO = 1.5
HOST_CPU = 90.0
ILLUSION_U, ILLUSION_SM = 0.85, 0.50
BW_RATIO = 2.0
PREFILL_RATIO = 2.5
#: The observed TTFT the prefill floor is compared with: from the actual send, the
#: same definition as the report's "TTFT (from actual send)" table.
TTFT_FLOOR_LABEL = "TTFT p50 (from actual send)"
#: Batches beyond this are not searched for the compute knee.
KNEE_LIMIT = 4096


@dataclass(slots=True)
class RuleInput:
    w: WindowStats
    s: EngineSignals
    ctx: RunContext
    level: str | None = None
    client_limited: bool | None = None
    client_reasons: list[str] = field(default_factory=list)
    agg: dict[str, Any] = field(default_factory=dict)
    #: The run's capacity curve (docs/design.md s.5); None for a run without levels
    #: (a monitor recording).
    curve: CapacityCurve | None = None
    #: The fitted model sizes the fixes (docs/design.md s.9, "One voice").
    sized_by_model: bool = False
    #: The client-limited flag clears its limits by less than 20%.
    client_marginal: bool = False


def evidence(key: str, name: str, value: Any, unit: str = "", source: str = "") -> Evidence:
    """One piece of evidence: ``key`` for programs, ``name`` for people."""
    if isinstance(value, float) and not math.isfinite(value):
        value = None
    return Evidence(key=key, name=name, value=value, unit=unit, source=source)


def busy_evidence(s: EngineSignals) -> list[Evidence]:
    """How busy the device was, and its utilisation U where busy was read from
    something else (SM activity, the engine's FLOP/s): U alone can look busy."""
    out = [evidence("device_busy", "device busy", s.busy, "fraction", s.busy_source)]
    if s.U is not None and s.busy is not s.U:
        out.append(
            evidence(
                "utilisation",
                "utilisation (U)",
                s.U,
                "fraction",
                "NVML gpu.utilization / engine process CPU",
            )
        )
    return out


def loadgen_evidence(ri: RuleInput) -> Evidence:
    """The load generator's CPU: what a starved client or a starved host shows in."""
    return evidence(
        "loadgen_cpu",
        "load generator CPU",
        ri.s.loadgen_cpu,
        "% of a core",
        "process.cpu_percent{name=loadgen}",
    )


def fmt(x: float | None, nd: int = 1) -> str:
    return "n/a" if x is None else f"{x:.{nd}f}"


def rq_evidence(ri: RuleInput) -> list[Evidence]:
    s, c = ri.s, ri.ctx
    out = [
        evidence("running", "running (R)", s.R, "requests", s.rq_source),
        evidence("waiting", "waiting (Q)", s.Q, "requests", s.rq_source),
    ]
    if s.S is not None:
        out.append(evidence("slots", "slots (S)", s.S, "sequences", s.S_source or c.slots_source))
    if s.plateau is not None:
        out.append(
            evidence(
                "slot_limit_inferred",
                "slot limit (inferred)",
                s.plateau.sentence(),
                "",
                s.plateau.source(),
            )
        )
    if s.kv is not None:
        out.append(
            evidence(
                "kv_cache_usage",
                "KV cache usage",
                s.kv,
                "fraction",
                "engine /metrics (engine.kv_cache_usage)",
            )
        )
    elif c.has_engine_metrics:
        out.append(
            evidence(
                "kv_cache_usage",
                "KV cache usage",
                "unknown",
                "",
                f"the engine ({c.engine}) exports no KV-cache usage",
            )
        )
    return out


def _floor_evidence(ri: RuleInput) -> list[Evidence]:
    s, w = ri.s, ri.w
    out: list[Evidence] = []
    if s.itl_ratio is not None:
        out += [
            evidence("itl_p50", "ITL p50", w.itl_p50, "s", w.itl_source),
            evidence("itl_floor", "ITL floor", s.itl_floor, "s", s.floor_source),
            evidence("itl_ratio", "ITL / floor", s.itl_ratio, "x", "observed / roofline floor"),
        ]
    if s.ttft_ratio is not None:
        src = str(w.extra.get("ttft_sent_p50_source") or "the window's records")
        out += [
            evidence("ttft_sent_p50", TTFT_FLOOR_LABEL, w.ttft_sent_p50, "s", src),
            evidence("ttft_floor", "TTFT floor (prefill)", s.ttft_floor, "s", s.floor_source),
            evidence("ttft_ratio", "TTFT / floor", s.ttft_ratio, "x", "observed / prefill floor"),
        ]
    return out


def _conf(base: float, ri: RuleInput) -> float:
    c = base * (0.7 if ri.s.inferred else 1.0)
    if ri.w.n < 10:
        c *= 0.85
    return round(max(0.05, min(0.99, c)), 2)


def _inferred_note(ri: RuleInput) -> str:
    return (
        " Engine metrics were missing: R and Q were inferred from client-side in-flight "
        "counts, so confidence is lower."
        if ri.s.inferred
        else ""
    )


FixLine = str | tuple[str, Fix | None]


def make_verdict(
    ri: RuleInput,
    vid: str,
    title: str,
    summary: str,
    evidence: list[Evidence],
    base_conf: float,
    fixes: Sequence[FixLine],
    *,
    marginal: bool = False,
) -> Verdict:
    """A verdict of this window; a ``marginal`` one says so in its title. A fix line
    may carry its typed action (``(text, Fix)``): the knob it turns and which way."""
    lines = [f if isinstance(f, tuple) else (f, None) for f in fixes]
    return Verdict(
        id=vid,
        title=title + (" (marginal)" if marginal else ""),
        summary=summary + _inferred_note(ri),
        window=VerdictWindow(start=ri.w.t0, end=ri.w.t1),
        evidence=evidence + _floor_evidence(ri),
        confidence=_conf(base_conf * (0.6 if marginal else 1.0), ri),
        fixes=[t for t, _ in lines],
        actions=[a for _, a in lines],
        level=ri.level,
        engine=ri.ctx.engine,
        marginal=marginal,
    )
