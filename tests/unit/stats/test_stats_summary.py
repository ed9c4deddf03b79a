"""summarize(): exact, numpy-equal percentiles (docs/design.md section 2)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infersight.core.errors import DataError
from infersight.stats import summary
from infersight.stats.summary import PERCENTILES, STAT_KEYS, summarize

finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)


@given(st.lists(finite, min_size=1, max_size=300))
@settings(max_examples=150, deadline=None)
def test_percentiles_equal_numpy(values: list[float]) -> None:
    s = summarize(values)
    arr = np.asarray(values)
    assert s["count"] == len(values)
    for key, q in PERCENTILES.items():
        assert s[key] == float(np.percentile(arr, q))
    assert s["mean"] == float(np.mean(arr))
    assert s["std"] == float(np.std(arr))
    assert s["min"] == min(values) and s["max"] == max(values)


@given(st.lists(st.tuples(finite, st.integers(0, 5)), min_size=1, max_size=100))
@settings(max_examples=100, deadline=None)
def test_weighted_equals_repeated(pairs: list[tuple[float, int]]) -> None:
    values = [v for v, _ in pairs]
    weights = [w for _, w in pairs]
    repeated = [v for v, w in pairs for _ in range(w)]
    assert summarize(values, weights) == summarize(repeated)


def test_empty_summary_has_count_zero() -> None:
    s = summarize([])
    assert set(s) == set(STAT_KEYS)
    assert s["count"] == 0 and s["p99"] is None and s["mean"] is None


def test_p999_is_reported_and_exact() -> None:
    values = list(range(10_000))
    s = summarize(values)
    assert s["p99.9"] == pytest.approx(9989.001)
    assert s["p99.9"] == float(np.percentile(values, 99.9))


@pytest.mark.parametrize(
    ("values", "weights"),
    [([1.0, 2.0], [1]), ([1.0], [-1]), ([1.0], [0.5])],
)
def test_bad_weights_rejected(values: list[float], weights: list[float]) -> None:
    with pytest.raises(DataError):
        summarize(values, weights)


def test_nan_rejected() -> None:
    with pytest.raises(DataError):
        summarize([1.0, float("nan")])


@given(st.lists(st.tuples(finite, st.integers(0, 40)), min_size=1, max_size=60))
@settings(max_examples=150, deadline=None)
def test_a_summary_from_the_weights_is_the_repeated_ones(
    pairs: list[tuple[float, int]],
) -> None:
    values = [v for v, _ in pairs]
    weights = [w for _, w in pairs]
    repeated = summarize([v for v, w in pairs for _ in range(w)])
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(summary, "REPEAT_MAX", 0)  # always from the weights
        got = summarize(values, weights)
    assert got["count"] == repeated["count"]
    if not got["count"]:
        return
    for key in STAT_KEYS[1:]:
        assert got[key] == pytest.approx(repeated[key], rel=1e-9, abs=1e-6), key


def test_a_billion_token_weight_takes_no_memory_to_speak_of() -> None:
    # an imported file once claimed a million tokens for a request: the model's
    # prediction pooled 400 such gaps and numpy asked for 3 GiB
    s = summarize(np.array([0.01, 0.02, 0.5]), np.array([10**9, 10**9, 1]))
    assert s["count"] == 2 * 10**9 + 1 and s["p50"] == 0.02 and s["p99.9"] == 0.02
    assert s["max"] == 0.5 and s["mean"] == pytest.approx(0.015)
