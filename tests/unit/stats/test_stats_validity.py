"""The validity checks of a level (docs/design.md section 2, "Validity") on records
built to pass or fail each one."""

from __future__ import annotations

import warnings

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from infersight.core.records import RequestRecord
from infersight.stats.bootstrap import quantile_ratio_interval
from infersight.stats.validity import (
    check_chunks,
    check_e2e,
    check_errors,
    check_rate,
    check_tokens,
    check_trend,
    invalid_metrics,
    mann_kendall,
    validity_lines,
)


def _rec(
    i: int,
    *,
    ttft: float = 0.05,
    itl: float = 0.01,
    chunks: int = 8,
    per: int = 1,
    usage: int | None = None,
    gap: float = 0.1,
    lag: float = 0.0,
) -> RequestRecord:
    t0 = i * gap
    times = [t0 + ttft + k * itl for k in range(chunks)]
    return RequestRecord(
        request_id=str(i),
        scheduled=t0,
        sent=t0 + lag * i,
        chunk_times=times,
        chunk_tokens=[1] * chunks,
        end=times[-1] + 1e-4,
        ok=True,
        completion_tokens=chunks * per if usage is None else usage,
    )


def test_clean_records_pass_every_check() -> None:
    recs = [_rec(i) for i in range(50)]
    for c in (
        check_tokens(recs),
        check_e2e(recs),
        check_chunks(recs),
        check_errors(recs),
        check_rate(recs, True),
        check_trend(recs),
    ):
        assert c["ok"] and c["invalidates"] == [], c


def test_each_fault_fails_its_check_and_names_what_it_invalidates() -> None:
    two = [_rec(i, per=2) for i in range(50)]
    assert not check_chunks(two)["ok"] and check_chunks(two)["invalidates"] == ["itl"]
    assert not check_e2e(two)["ok"]  # ITL per chunk, not per token
    off = [_rec(i, usage=10) for i in range(50)]
    assert not check_tokens(off)["ok"] and "tpot" in check_tokens(off)["invalidates"]
    slow = [_rec(i, lag=0.02) for i in range(50)]  # sent 20% slower than scheduled
    assert not check_rate(slow, True)["ok"] and check_rate(slow, False)["ok"]
    drift = [_rec(i, ttft=0.05 * (1 + i / 25)) for i in range(50)]
    assert not check_trend(drift)["ok"]
    failed = [
        *_rec_list(97),
        *[RequestRecord(request_id=f"e{i}", scheduled=0.0, error="X") for i in range(3)],
    ]
    assert not check_errors(failed)["ok"] and check_errors(failed)["invalidates"] == ["goodput"]


def _rec_list(n: int) -> list[RequestRecord]:
    return [_rec(i) for i in range(n)]


def test_invalid_metrics_and_lines_come_from_failed_checks_only() -> None:
    agg = {
        "validity": [check_chunks([_rec(i, per=2) for i in range(9)]), check_tokens(_rec_list(9))]
    }
    assert set(invalid_metrics(agg)) == {"itl"}
    (line,) = validity_lines("c=1", agg)
    assert line.startswith("c=1 invalid tokens_per_chunk") and "itl" in line
    assert invalid_metrics({}) == {} and validity_lines("x", {}) == []


@settings(max_examples=25, deadline=None)
@given(st.integers(20, 200), st.integers(1, 5), st.floats(0.5, 2.0), st.integers(0, 10**6))
def test_bootstrap_interval_holds_the_ratio_and_tracks_a_scale(
    n: int, k: int, scale: float, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    a = rng.lognormal(0.0, 0.3, n)
    b = scale * rng.lognormal(0.0, 0.3, n * k)  # unequal sizes, 1:1 to 1:5
    ratio, low, high = quantile_ratio_interval(a, b, 50.0, reps=300)
    assert ratio is not None and low is not None and high is not None
    assert low <= high and low > 0.0
    # The true ratio lies within a generous band of the interval: a gross bias would not.
    assert low / 1.5 <= scale <= high * 1.5


def test_a_file_written_before_validity_gets_it_from_its_records() -> None:
    from infersight.report.view import level_aggregate
    from infersight.stats.aggregate import aggregate

    recs = [_rec(i, per=2) for i in range(30)]
    stored = aggregate(recs, target_rate=10.0)
    old = {k: v for k, v in stored.items() if k != "validity"}
    got = level_aggregate(old, recs)
    assert [c["check"] for c in got["validity"]] == [c["check"] for c in stored["validity"]]
    assert "itl" in invalid_metrics(got)


def test_a_trend_of_tied_values_is_none_and_quiet() -> None:
    # Ties in both times and values make scipy's interval variance negative; only the
    # slope is read, and it is 0 with no RuntimeWarning.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        p, slope = mann_kendall([0.0] * 5 + [1.0] * 5, [1.0] * 10)
    assert slope == 0.0 and p == 1.0
