"""An upstream's error share over a sliding window, its weight, and the weighted order."""

from __future__ import annotations

import collections
import random

from infersight.gateway.router import Router
from infersight.gateway.upstream_health import (
    MIN_SAMPLES,
    MIN_WEIGHT,
    WINDOW_S,
    HealthWindow,
    weighted_order,
)


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_weight_falls_with_the_error_share_and_returns_as_errors_leave_the_window() -> None:
    clock = Clock()
    h = HealthWindow(clock=clock)
    for _ in range(MIN_SAMPLES - 1):
        h.record(False)
    assert h.weight() == 1.0  # too few outcomes to judge
    h.record(True)
    assert h.weight() == MIN_WEIGHT and h.error_share() == 0.9
    clock.t += WINDOW_S - 1  # still inside the window
    for _ in range(90):
        h.record(True)
    assert h.counts() == (91, 9)
    assert 0.5 < h.weight() < 1.0  # 9% errors: a smaller share, not the floor
    clock.t += 1.0  # the first second's outcomes (9 errors, 1 answer) leave
    assert h.counts() == (90, 0) and h.weight() == 1.0
    clock.t += 10 * WINDOW_S  # a long gap clears everything
    assert h.counts() == (0, 0)


def test_weighted_order_puts_each_first_in_proportion_to_its_weight() -> None:
    rng = random.Random(7)
    firsts = collections.Counter(
        weighted_order(["a", "b", "c"], [0.1, 1.0, 1.0], rng.random)[0] for _ in range(20000)
    )
    assert abs(firsts["a"] / 20000 - 0.1 / 2.1) < 0.01, firsts
    assert abs(firsts["b"] - firsts["c"]) / 20000 < 0.03, firsts


class U:
    def __init__(self, name: str, weight: float = 1.0) -> None:
        self.name, self._weight = name, weight

    def serves(self, model: str) -> bool:
        return True

    def load(self) -> float:
        return 0.0

    def available(self) -> bool:
        return True

    def weight(self) -> float:
        return self._weight

    def seconds_until_probe(self) -> float:
        return 0.0


def test_router_gives_a_low_weight_replica_a_small_share_and_equal_ones_turns() -> None:
    a, b = U("a"), U("b")
    r = Router([a, b])
    firsts = [r.candidates("m")[0].upstream.name for _ in range(10)]
    assert firsts == ["a", "b"] * 5  # healthy: strict rotation, as before
    a._weight = MIN_WEIGHT
    share = sum(r.candidates("m")[0].upstream is a for _ in range(4000)) / 4000
    assert share < 0.1, f"a weighs {MIN_WEIGHT} against 1 but came first {share:.0%} of the time"
    assert {c.upstream.name for c in r.candidates("m")} == {"a", "b"}  # still a candidate
