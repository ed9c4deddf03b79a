"""Whether a choice holds when it is run again (docs/design.md section 8).

The chosen setting is measured once more at the end (the baseline's is its A/A run).
That confirmation run must meet the objective: with an SLO, meet the SLO; without one,
reach the trial's measured throughput within the noise floor. A choice its confirmation
refutes is never reported: the next best setting is confirmed instead.
"""

from __future__ import annotations

from collections.abc import Mapping

from infersight.tune.objective import Scored

__all__ = ["confirms"]


def confirms(
    trial: Scored, again: Scored, slo: Mapping[str, float], floor: float
) -> tuple[bool, str]:
    """(whether ``again`` confirms ``trial``, why in words)."""
    if again.value is None:
        return False, "its confirmation run measured nothing"
    if slo:
        if again.slo_met:
            return True, f"its confirmation run met the SLO ({again.value:.3g} req/s)"
        worst = f" (worst check at {again.margin:.0%} of its limit)" if again.margin else ""
        return False, f"its confirmation run missed the SLO{worst}"
    was = trial.value or 0.0
    if again.value >= (1.0 - floor) * was:
        return True, (
            f"its confirmation run reached {again.value:.3g} req/s, within the noise "
            f"floor of {floor:.1%} of {was:.3g}"
        )
    return False, (
        f"its confirmation run reached {again.value:.3g} req/s, below {was:.3g} by "
        f"more than the noise floor of {floor:.1%}"
    )
