"""Adaptive limiters find the knee of a simulated upstream on their own."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from infersight.gateway.limiter import AIMDLimit, GradientLimit, Limiter, StaticLimit, make_limiter


def simulate(lim: Limiter, knee: int, rounds: int = 3000) -> list[int]:
    """An upstream with ``knee`` slots: latency is flat up to the knee, then grows
    linearly (requests queue inside it). Concurrency always fills the limit."""
    seen = []
    for _ in range(rounds):
        c = lim.limit
        latency = 0.1 * max(1.0, c / knee)
        lim.on_sample(latency, c, dropped=False)
        seen.append(lim.limit)
    return seen


def test_static_never_moves() -> None:
    lim = StaticLimit(7)
    assert simulate(lim, knee=20)[-1] == 7


def test_gradient_converges_near_the_knee_from_below_and_above() -> None:
    for start in (2, 200):
        lim = GradientLimit(start, 1, 1000, relearn_s=1e9, probe_every=500)
        tail = simulate(lim, knee=32, rounds=6000)[-1000:]
        avg = sum(tail) / len(tail)
        assert 24 <= avg <= 48, (start, avg)


def test_aimd_grows_then_backs_off_near_the_knee() -> None:
    lim = AIMDLimit(4, 1, 1000, tolerance=1.5)
    tail = simulate(lim, knee=32, rounds=20000)[-2000:]
    assert min(tail) >= 20 and max(tail) <= 60


def test_drops_shrink_the_limit() -> None:
    for lim in (AIMDLimit(50), GradientLimit(50)):
        lim.on_sample(0.1, 50, dropped=True)
        assert lim.limit < 50


@given(
    st.sampled_from(["static", "aimd", "gradient"]),
    st.integers(1, 50),
    st.lists(st.tuples(st.floats(0.0, 10.0), st.integers(0, 100), st.booleans()), max_size=200),
)
def test_limit_always_within_bounds(
    kind: str, start: int, samples: list[tuple[float, int, bool]]
) -> None:
    lim = make_limiter(kind, start, 2, 64)
    for lat, inflight, dropped in samples:
        lim.on_sample(lat, inflight, dropped)
        assert 2 <= lim.limit <= 64
