"""What a prediction past the run's measured range rests on (docs/design.md section 9).

A run shows the engine's step time only up to the most sequences it had running. A
prediction whose mean running count goes past that carries the fitted step time into
a range the run never saw, and an engine whose compute saturates just past it does
worse. Such a prediction is an estimate, and it comes with its low end: the same
setting with the step time growing in proportion to the running count from the
measured top on (throughput per step stops growing there).
"""

from __future__ import annotations

from collections.abc import Callable

from infersight.core.server_model import Prediction, ServerModel

__all__ = ["MARGIN", "beyond_measured", "saturated_text"]

#: Running sequences past the measured top that still count as within it (a mean
#: running count at the top itself comes out a little above or below it).
MARGIN = 0.5


def saturated_text(p: Prediction) -> str:
    """The low end's figures in words."""
    parts = []
    if p.throughput is not None:
        parts.append(f"throughput {p.throughput:.3g} req/s")
    if p.ttft_p50 is not None:
        parts.append(f"TTFT p50 {p.ttft_p50 * 1000:.0f} ms")
    if p.tpot_p50 is not None:
        parts.append(f"TPOT p50 {p.tpot_p50 * 1000:.1f} ms")
    return ", ".join(parts)


def beyond_measured(
    m: ServerModel, p: Prediction, at: Callable[[float], Prediction]
) -> tuple[Prediction | None, str]:
    """(the low end, a note) when ``p`` runs more sequences than the run measured;
    ``(None, "")`` otherwise. ``at(n)`` predicts the same setting saturating past n."""
    n = m.measured.get("n", 0.0)
    if not n or p.running is None or p.running <= n + MARGIN:
        return None, ""
    low = at(n)
    return low, (
        f"{p.running:.1f} running is past the {n:.0f} the run had: the step time is "
        f"carried past {n:.0f} as fitted; if compute saturates at {n:.0f}: "
        f"{saturated_text(low)}"
    )
