"""The gateway's limiters: static, and the shared adaptive law fed by admission."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from infersight.gateway.limiter import AdaptiveLimit, Limiter, StaticLimit, make_limiter


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def simulate(lim: Limiter, clock: Clock, knee: int, rounds: int = 400) -> list[int]:
    """An upstream with ``knee`` slots: latency is flat up to the knee, then grows
    linearly (requests queue inside it). Concurrency always fills the limit; the
    requests of a round finish one after another across its latency."""
    seen = []
    for _ in range(rounds):
        c = lim.limit
        latency = 0.1 * max(1.0, c / knee)
        for _ in range(c):
            clock.t += latency / c
            lim.on_sample(latency, c, dropped=False)
        seen.append(lim.limit)
    return seen


def test_static_never_moves() -> None:
    lim = StaticLimit(7)
    assert simulate(lim, Clock(), knee=20)[-1] == 7


def test_aimd_and_gradient_name_the_shared_adaptive_law() -> None:
    for kind in ("aimd", "gradient"):
        assert isinstance(make_limiter(kind, 8), AdaptiveLimit)
    assert isinstance(make_limiter("static", 8), StaticLimit)


def test_adaptive_finds_the_knee_from_below_and_above() -> None:
    for start in (2, 200):
        clock = Clock()
        lim = AdaptiveLimit(start, 1, 1000, clock=clock)
        tail = simulate(lim, clock, knee=32)[-100:]
        avg = sum(tail) / len(tail)
        # Past the knee throughput is flat: the law keeps no level above it for long.
        assert 24 <= avg <= 48, (start, avg)


def test_drops_shrink_the_limit() -> None:
    clock = Clock()
    lim = AdaptiveLimit(50, clock=clock)
    clock.t = 1.0
    lim.on_sample(0.1, 50, dropped=True)
    assert lim.limit < 50


@given(
    st.sampled_from(["static", "aimd", "gradient"]),
    st.integers(1, 50),
    st.lists(
        st.tuples(st.floats(0.0, 2.0), st.floats(0.0, 10.0), st.integers(0, 100), st.booleans()),
        max_size=200,
    ),
)
def test_limit_always_within_bounds(
    kind: str, start: int, samples: list[tuple[float, float, int, bool]]
) -> None:
    clock = Clock()
    lim = (
        AdaptiveLimit(start, 2, 64, clock=clock) if kind != "static" else StaticLimit(start, 2, 64)
    )
    for gap, lat, inflight, dropped in samples:
        clock.t += gap
        lim.on_sample(lat, inflight, dropped)
        assert 2 <= lim.limit <= 64
