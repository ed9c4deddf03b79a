"""histogram_quantile against exact percentiles of the observations (Hypothesis)."""

from __future__ import annotations

import bisect
import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from infersight.telemetry.promtext import bucket_delta, histogram_quantile, parse_metrics

BOUNDS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, math.inf]


def _buckets(values: list[float]) -> list[tuple[float, float]]:
    vs = sorted(values)
    return [(b, float(bisect.bisect_right(vs, b))) for b in BOUNDS]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.floats(0.0, 9.99, allow_nan=False), min_size=1, max_size=300),
    st.sampled_from([0.5, 0.9, 0.99]),
)
def test_quantile_falls_in_the_bucket_of_the_exact_percentile(
    values: list[float], q: float
) -> None:
    est = histogram_quantile(q, _buckets(values))
    assert est is not None
    # the bucket that holds the rank-th smallest observation
    rank = math.ceil(q * len(values))
    true = sorted(values)[max(rank, 1) - 1]
    i = bisect.bisect_left(BOUNDS, true)
    lo = BOUNDS[i - 1] if i > 0 else 0.0
    assert lo - 1e-12 <= est <= BOUNDS[i] + 1e-12
    # and it is close to numpy's exact percentile at bucket resolution
    exact = float(np.percentile(values, q * 100))
    j = bisect.bisect_left(BOUNDS, exact)
    assert abs(est - exact) <= BOUNDS[max(i, j)] - (BOUNDS[min(i, j) - 1] if min(i, j) > 0 else 0.0)


@given(st.lists(st.floats(0.0, 20.0, allow_nan=False), min_size=1, max_size=100))
def test_quantile_is_monotone_in_q(values: list[float]) -> None:
    b = _buckets(values)
    qs = [histogram_quantile(q, b) for q in (0.1, 0.5, 0.9, 0.99)]
    assert all(x is not None for x in qs)
    assert qs == sorted(qs)  # type: ignore[type-var]


def test_empty_and_inf_only() -> None:
    assert histogram_quantile(0.5, []) is None
    assert histogram_quantile(0.5, [(1.0, 0.0), (math.inf, 0.0)]) is None
    # every observation above the highest finite bound -> that bound (PromQL rule)
    assert histogram_quantile(0.5, [(1.0, 0.0), (math.inf, 5.0)]) == 1.0


@given(
    st.lists(st.integers(0, 50), min_size=3, max_size=3),
    st.lists(st.integers(0, 50), min_size=3, max_size=3),
)
def test_bucket_delta(a: list[int], d: list[int]) -> None:
    ca = np.cumsum(a).tolist()
    cb = (np.cumsum(a) + np.cumsum(d)).tolist()
    before = list(zip([0.1, 1.0, math.inf], ca, strict=True))
    now = list(zip([0.1, 1.0, math.inf], cb, strict=True))
    assert bucket_delta(now, before) == list(
        zip([0.1, 1.0, math.inf], np.cumsum(d).tolist(), strict=True)
    )
    assert bucket_delta(now, None) is None
    if sum(d) > 0:  # the reverse is a counter reset
        assert bucket_delta(before, now) is None


@settings(max_examples=50, deadline=None)
@given(
    st.dictionaries(
        st.from_regex(r"[a-z][a-z0-9_]{0,10}(:[a-z_]{1,8})?", fullmatch=True),
        st.floats(-1e12, 1e12, allow_nan=False),
        min_size=1,
        max_size=10,
    )
)
def test_gauges_roundtrip(metrics: dict[str, float]) -> None:
    text = "".join(f"# TYPE {k} gauge\n{k} {v!r}\n" for k, v in metrics.items())
    series, hists = parse_metrics(text)
    assert not hists
    assert {s.name: s.value for s in series} == metrics
