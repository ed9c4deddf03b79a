"""Open-loop schedules: mean rate, determinism, bounds (Hypothesis)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infersight.bench.schedule import open_loop_schedule
from infersight.core.errors import ConfigError

rates = st.floats(min_value=0.5, max_value=500.0)
seeds = st.integers(0, 2**32 - 1)


@given(rates, seeds, st.sampled_from(["poisson", "gamma"]), st.floats(0.25, 4.0))
@settings(max_examples=60, deadline=None)
def test_random_schedules_have_the_mean_rate(
    rate: float, seed: int, arrival: str, burstiness: float
) -> None:
    n = 4000
    t = open_loop_schedule(rate, arrival=arrival, burstiness=burstiness, requests=n, seed=seed)
    assert len(t) == n and t[0] == 0.0
    assert np.all(np.diff(t) >= 0)
    gaps = np.diff(t)
    # The mean gap of n-1 gamma draws has relative SD cv/sqrt(n-1); allow 5 SDs.
    cv = 1.0 if arrival == "poisson" else 1.0 / math.sqrt(burstiness)
    tol = 5 * cv / math.sqrt(n - 1)
    assert abs(gaps.mean() * rate - 1.0) < tol
    if arrival == "gamma":
        assert abs(gaps.std() / gaps.mean() - cv) < 0.25 * cv + 0.05


@given(rates, seeds, st.sampled_from(["constant", "poisson", "gamma"]))
@settings(max_examples=40, deadline=None)
def test_same_seed_same_schedule(rate: float, seed: int, arrival: str) -> None:
    a = open_loop_schedule(rate, arrival=arrival, burstiness=0.5, requests=200, seed=seed)
    b = open_loop_schedule(rate, arrival=arrival, burstiness=0.5, requests=200, seed=seed)
    assert np.array_equal(a, b)
    if arrival != "constant":
        c = open_loop_schedule(rate, arrival=arrival, burstiness=0.5, requests=200, seed=seed + 1)
        assert not np.array_equal(a, c)


@given(rates, st.floats(0.5, 30.0), st.sampled_from(["constant", "poisson", "gamma"]))
@settings(max_examples=40, deadline=None)
def test_duration_bounds_the_schedule(rate: float, duration: float, arrival: str) -> None:
    t = open_loop_schedule(rate, arrival=arrival, duration=duration, seed=1)
    assert len(t) >= 1 and t[-1] < duration
    expected = rate * duration
    assert abs(len(t) - expected) <= 6 * math.sqrt(expected) * 2 + 2


def test_constant_is_evenly_spaced_and_all_at_once_is_zero() -> None:
    t = open_loop_schedule(4.0, requests=5)
    assert list(t) == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert list(open_loop_schedule(math.inf, requests=3)) == [0.0, 0.0, 0.0]


def test_bad_arguments() -> None:
    with pytest.raises(ConfigError):
        open_loop_schedule(1.0)
    with pytest.raises(ConfigError):
        open_loop_schedule(0.0, requests=3)
    with pytest.raises(ConfigError):
        open_loop_schedule(1.0, requests=3, arrival="weird")
