"""The under-loaded rule: room the level did not use (docs/design.md section 5)."""

from __future__ import annotations

from infersight.core.verdicts import Verdict
from infersight.diagnose.fixes import under_loaded_fixes
from infersight.diagnose.rules.base import (
    BUSY_LOW,
    UNDER_R_OF_S,
    RuleInput,
    busy_evidence,
    evidence,
    fmt,
    make_verdict,
    rq_evidence,
)

__all__ = ["under_loaded"]


def _idle_by_knee(ri: RuleInput, cpu: bool) -> tuple[bool, str, float]:
    """An engine whose device use is no reading: a CPU engine (its threads spin, so its
    CPU use says nothing) or one with no device readings at all (vLLM's CPU build, a
    remote server). Below half the measured knee it has room; with no knee measured,
    how busy it is stays unknown (said so, at lower confidence)."""
    s, curve = ri.s, ri.curve
    if curve is not None and curve.knee_reached and curve.knee:
        if (s.R or 0.0) >= 0.5 * curve.knee:
            return False, "", 0.0
        return True, f"below half the measured knee ({curve.knee:.3g} in flight)", 0.85
    why = (
        "the run measured no knee to calibrate the CPU's ceiling, and spinning threads "
        "make CPU use say nothing"
        if cpu
        else "the run read no device use and measured no knee"
    )
    return True, f"compute use unknown: {why}", 0.6


def under_loaded(ri: RuleInput) -> Verdict | None:
    s = ri.s
    if s.Q is None or s.Q >= 0.1 or s.S is None or s.R is None or s.R >= UNDER_R_OF_S * s.S:
        return None
    low = [x for x in (s.U, s.SM) if x is not None]
    cpu = ri.ctx.engine in ("embedded", "llamacpp")
    if not ri.ctx.has_gpu and s.SM is None and (cpu or s.U is None):
        idle, busy_txt, conf = _idle_by_knee(ri, cpu)
        if not idle:
            return None
        ev = rq_evidence(ri)
    else:
        if not low or min(low) >= BUSY_LOW:
            return None
        ev = [*rq_evidence(ri), *busy_evidence(s)]
        if s.SM is not None:
            ev.append(evidence("sm_activity", "SM activity / MFU", s.SM, "fraction", s.busy_source))
        used = "compute used (MFU)" if s.busy_source.startswith("model FLOP") else "device busy"
        busy_txt, conf = f"{used} {min(low) * 100:.1f}%", 0.85
    return make_verdict(
        ri,
        "under_loaded",
        "Under-loaded (request-starved)",
        f"The server waits for work: {fmt(s.R)} of {s.S:.0f} slots busy, nothing queued, "
        f"{busy_txt}; throughput is limited by the offered load.",
        ev,
        conf,
        under_loaded_fixes(ri.ctx.engine, s.S),
    )
