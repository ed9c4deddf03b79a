"""Past the measured running count: the engine's saturating step time and the low end
that every such prediction carries (docs/design.md section 9)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from infersight.core.server_model import Prediction
from infersight.servermodel import fit_model, run_data
from infersight.servermodel.bounds import MARGIN, beyond_measured
from infersight.servermodel.simulate import Engine
from support.sim_runs import sweep_run


def _engine(a: float, b: float, k: float, saturate: float | None) -> Engine:
    return Engine(
        slots=None,
        kv=None,
        kv_reserve=False,
        a=a,
        b=b,
        k=k,
        c=0.0,
        e=0.0,
        kappa=0.0,
        c_first=0.0,
        saturate=saturate,
    )


@given(
    a=st.floats(1e-4, 1.0),
    b=st.floats(0.0, 1.0),
    k=st.floats(0.0, 16.0),
    top=st.integers(1, 32),
    n=st.integers(1, 256),
)
def test_the_saturating_step_never_beats_the_fitted_one_nor_the_measured_top(
    a: float, b: float, k: float, top: int, n: int
) -> None:
    fitted, sat = _engine(a, b, k, None), _engine(a, b, k, float(top))
    assert sat.step(n) >= fitted.step(n) * (1 - 1e-12)
    if n <= top:
        assert sat.step(n) == fitted.step(n)
    else:
        # sequences per second of step time stop growing at the measured top
        assert n / sat.step(n) <= top / sat.step(top) * (1 + 1e-9)


def test_a_prediction_within_the_measured_running_count_has_no_low_end() -> None:
    m = fit_model(run_data(sweep_run(slots=4)))
    top = m.measured["n"]
    calls: list[float] = []

    def at(n: float) -> Prediction:
        calls.append(n)
        return Prediction(throughput=1.0)

    assert beyond_measured(m, Prediction(running=top + MARGIN), at) == (None, "")
    assert beyond_measured(m, Prediction(running=None), at) == (None, "")
    assert not calls
    low, note = beyond_measured(m, Prediction(running=2 * top), at)
    assert calls == [top] and low == Prediction(throughput=1.0)
    assert f"past the {top:.0f} the run had" in note and "throughput 1 req/s" in note
