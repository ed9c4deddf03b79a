"""The capacity curve (docs/design.md section 2): its points, the measured knee, the
plateau's shape and the best operating point, on simulated servers with a known truth."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infersight.core.curve import CapacityCurve, CurvePoint
from infersight.diagnose import diagnose_run
from infersight.diagnose.knee import find_knee
from infersight.stats.operating_point import best_level, growth_per_doubling
from support.sim_runs import sweep_run


def _pt(level: str, x: float, thr: float, tpot: float, ttft: float) -> CurvePoint:
    return CurvePoint(
        level=level,
        inflight=x,
        client_inflight=x,
        throughput=thr,
        tpot_p50=tpot,
        ttft_p50=ttft,
        time_in_engine=x / thr,
        steady=True,
    )


@given(st.floats(0.5, 64), st.floats(0.1, 100), st.floats(1.05, 16), st.floats(0.2, 5))
def test_growth_per_doubling_compounds(x0: float, y0: float, ratio: float, g: float) -> None:
    # y grows by the factor (1 + g) for every doubling of x
    x1 = x0 * ratio
    y1 = y0 * (1 + g) ** math.log2(ratio)
    assert growth_per_doubling(x0, y0, x1, y1) == pytest.approx(g, rel=1e-6, abs=1e-9)


def test_compute_knee_where_throughput_flattens_and_tpot_grows() -> None:
    curve = CapacityCurve(
        points=[
            _pt("c=1", 1, 4, 0.025, 0.06),
            _pt("c=2", 2, 8, 0.025, 0.06),
            _pt("c=4", 4, 16, 0.026, 0.06),
            _pt("c=8", 8, 16.5, 0.05, 0.12),
            _pt("c=16", 16, 16.9, 0.10, 0.24),
        ]
    )
    find_knee(curve)
    assert (curve.plateau, curve.knee, curve.knee_level, curve.knee_reached) == (
        "compute",
        4,
        "c=4",
        True,
    )


def test_admission_when_tpot_stays_flat_and_ttft_grows() -> None:
    curve = CapacityCurve(
        points=[
            _pt("c=1", 1, 4.1, 0.0102, 0.051),
            _pt("c=4", 4, 16.4, 0.0102, 0.052),
            _pt("c=8", 8, 16.4, 0.0102, 0.30),
            _pt("c=16", 16, 16.4, 0.0102, 0.78),
        ]
    )
    find_knee(curve)
    assert curve.plateau == "admission" and not curve.knee_reached and curve.knee is None
    assert curve.plateau_level == "c=4" and round(curve.plateau_at or 0) == 4


def test_a_starved_clients_short_tpot_at_the_plateaus_start_is_no_growth() -> None:
    # A client starved of CPU read c=4's first tokens late and the rest in a burst: its
    # TPOT looks a third of the server's, and c=16's ordinary TPOT would "grow" 2.7x
    # from it. Against c=1's TPOT nothing grew: the same admission limit as above.
    curve = CapacityCurve(
        points=[
            _pt("c=1", 1, 4.0, 0.0111, 0.20),
            _pt("c=4", 4, 16.1, 0.0037, 0.23),
            _pt("c=16", 16, 16.5, 0.0100, 0.92),
        ]
    )
    find_knee(curve)
    assert curve.plateau == "admission" and not curve.knee_reached
    assert round(curve.plateau_at or 0) == 4


def test_no_knee_while_throughput_still_grows() -> None:
    curve = CapacityCurve(
        points=[
            _pt("c=1", 1, 4, 0.02, 0.05),
            _pt("c=4", 4, 15, 0.022, 0.05),
            _pt("c=16", 16, 40, 0.04, 0.08),
        ]
    )
    find_knee(curve)
    assert not curve.knee_reached and curve.above == 16 and curve.plateau is None
    assert any(n.startswith("knee not reached (above 16 in flight)") for n in curve.notes)


def test_the_demo_table_has_its_knee_at_c4() -> None:
    """The issue's demo: +7% from c=4 to c=16 while TPOT rose 63%."""
    curve = CapacityCurve(
        points=[
            _pt("c=1", 1, 0.8, 0.0118, 0.2),
            _pt("c=4", 4, 1.91, 0.0289, 0.5),
            _pt("c=16", 8, 2.05, 0.0472, 3.0),
        ]
    )
    curve.points[2].client_inflight = 16  # 8 slots: 8 run, 8 wait
    find_knee(curve)
    assert curve.plateau == "compute" and curve.knee_level == "c=4"


def _agg(tok: float, ttft99: float, *, steady: bool = True, ok: bool = True) -> dict[str, Any]:
    return {
        "requests": {"ok": 30 if ok else 0},
        "output_token_throughput": tok,
        "request_throughput": tok / 48,
        "ttft": {"p99": ttft99},
        "window": {"steady": steady},
        "sustainability": {"judged": False},
        "client_limited": {"flag": False},
    }


def test_best_operating_point_is_the_knee_not_the_unsteady_top() -> None:
    # the demo: c=16 95.3 tok/s, TTFT p99 5.84 s, no steady state; c=4 90.4, 1.08 s
    levels = [
        ("c=1", _agg(40, 0.3)),
        ("c=4", _agg(90.4, 1.08)),
        ("c=16", _agg(95.3, 5.84, steady=False)),
    ]
    assert best_level(levels, knee_level="c=4") == "c=4"
    # without a measured knee: the most throughput, as 5.1% is more than 5%
    assert best_level(levels) == "c=16"
    # within 5%: the steady one, even when the unsteady one is faster to first token
    near = [("c=4", _agg(93, 1.08)), ("c=16", _agg(95.3, 0.9, steady=False))]
    assert best_level(near) == "c=4"
    # among steady levels within 5%: the lowest latency
    both = [("c=4", _agg(93, 1.08)), ("c=8", _agg(95.3, 2.0))]
    assert best_level(both) == "c=4"
    assert best_level([("c=1", _agg(10, 1, ok=False))]) is None


def test_admission_limit_from_the_curve_alone_without_engine_metrics() -> None:
    """4 slots, 0.24 s a request, c=1..16 and no /metrics: the shape tells."""
    d = diagnose_run(sweep_run(slots=4))
    c = d.curve
    assert c is not None and c.plateau == "admission" and round(c.plateau_at or 0) == 4
    assert not c.knee_reached and c.best_level == "c=4"
    top = next(p for p in c.points if p.level == "c=16")
    assert top.inflight == pytest.approx(4, abs=0.2) and top.queue == pytest.approx(12, abs=0.5)
    assert top.time_in_engine == pytest.approx(0.24, rel=0.03)
    v = next(v for v in d.verdicts if v.level == "c=16")
    assert v.id == "slot_bound", [(x.id, x.summary) for x in d.verdicts]
    assert "the fitted model" in str(v.find("slots").source)  # type: ignore[union-attr]


def test_curve_points_follow_the_engines_running_count() -> None:
    d = diagnose_run(sweep_run(slots=4, metrics=True))
    assert d.curve is not None
    assert {p.inflight_source for p in d.curve.points} == {"engine"}
    top = d.curve.points[-1]
    assert top.inflight == pytest.approx(4, abs=0.1) and top.client_inflight == pytest.approx(
        16, abs=0.2
    )
    assert d.curve.plateau == "admission"


def _engine_curve(*pts: CurvePoint, top_clients: float) -> CapacityCurve:
    """Points whose R the engine measured; the last level had ``top_clients`` in flight."""
    for p in pts:
        p.inflight_source = "engine"
    pts[-1].client_inflight = top_clients
    curve = CapacityCurve(points=list(pts))
    find_knee(curve)
    return curve


def test_work_that_grows_in_the_engine_without_throughput_is_compute() -> None:
    """The demo on a busy box: TPOT flat from c=4 to c=16, but the engine ran 8 instead
    of 4 for the same throughput: each request's time in it doubled, so compute, not an
    admission limit (which would have capped R)."""
    curve = _engine_curve(
        _pt("c=1", 1, 0.43, 0.037, 0.54),
        _pt("c=4", 4, 0.64, 0.115, 1.3),
        _pt("c=16", 8, 0.65, 0.111, 20.2),
        top_clients=16,
    )
    assert curve.plateau == "compute" and curve.knee_level == "c=4"
    capped = _engine_curve(
        _pt("c=1", 1, 4.1, 0.01, 0.05),
        _pt("c=4", 4, 16.4, 0.01, 0.05),
        _pt("c=16", 4, 16.4, 0.01, 0.78),
        top_clients=16,
    )
    assert capped.plateau == "admission"


def test_tpot_that_grows_while_the_engines_count_holds_is_the_clients_reading() -> None:
    """A client short of CPU at c=16 read each stream's last tokens late: its TPOT grew
    1.7x while the engine ran 4 at both levels for the same throughput. The same running
    count takes the same step time, so this is the admission limit, not compute."""
    curve = _engine_curve(
        _pt("c=1", 1, 4.0, 0.0107, 0.21),
        _pt("c=4", 4, 16.3, 0.0101, 0.20),
        _pt("c=16", 4, 15.5, 0.0178, 0.93),
        top_clients=16,
    )
    assert curve.plateau == "admission" and not curve.knee_reached
    assert round(curve.plateau_at or 0) == 4
