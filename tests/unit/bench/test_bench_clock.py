"""Clock offsets between hosts, the closed-loop index split of Ray workers, and the
per-worker client-limited flag."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infersight.bench.clock import (
    ClockProbe,
    estimate_offset,
    proven_drift,
    shift_record,
    shift_sample,
)
from infersight.bench.distributed.ray_actor import owned_indices
from infersight.core.errors import DataError
from infersight.core.records import RequestRecord, Sample
from infersight.stats.aggregate import aggregate

delays = st.floats(min_value=0.0, max_value=0.5, allow_nan=False)


@settings(max_examples=200, deadline=None)
@given(
    offset=st.floats(min_value=-1e6, max_value=1e6, allow_nan=False),
    start=st.floats(min_value=0.0, max_value=1e5, allow_nan=False),
    trips=st.lists(st.tuples(delays, delays), min_size=1, max_size=12),
)
def test_offset_interval_holds_the_true_offset_whatever_the_delays(
    offset: float, start: float, trips: list[tuple[float, float]]
) -> None:
    # driver_time = worker_time + offset; each probe's way out and back take any time.
    probes, t = [], start
    for out, back in trips:
        remote = (t + out) - offset
        probes.append(ClockProbe(sent=t, remote=remote, received=t + out + back))
        t += out + back + 0.001
    est = estimate_offset(probes)
    tol = 1e-9 * max(1.0, abs(offset), t)  # floating-point rounding only
    assert est.low - tol <= offset <= est.high + tol
    assert est.rtt == min(p.rtt for p in probes)  # the shortest round trip wins
    assert est.uncertainty == pytest.approx(est.rtt / 2)
    assert est.probes == len(probes)


def test_no_probe_is_a_clear_error() -> None:
    with pytest.raises(DataError):
        estimate_offset([])
    with pytest.raises(DataError):  # received before sent: not a round trip
        estimate_offset([ClockProbe(sent=2.0, remote=1.0, received=1.0)])


def test_proven_drift_only_when_the_intervals_part() -> None:
    a = estimate_offset([ClockProbe(10.0, 5.0, 10.002)])  # 5.001 ± 0.001
    near = estimate_offset([ClockProbe(20.0, 15.0005, 20.002)])  # 5.0005 ± 0.001
    far = estimate_offset([ClockProbe(30.0, 24.99, 30.002)])  # 5.011 ± 0.001
    assert proven_drift(a, near) == 0.0
    assert proven_drift(a, far) == pytest.approx(0.008)
    assert proven_drift(far, a) == pytest.approx(0.008)


def test_shift_moves_every_timestamp_and_keeps_durations() -> None:
    rec = RequestRecord(
        request_id="r-0",
        scheduled=100.0,
        sent=100.001,
        headers=100.01,
        chunk_times=[100.05, 100.06, 100.07],
        chunk_tokens=[1, 1, 1],
        end=100.08,
        ok=True,
        completion_tokens=3,
    )
    before = (rec.ttft, rec.tpot, rec.e2e, rec.schedule_lag)
    shift_record(rec, 1234.5)
    assert rec.scheduled == 1334.5 and rec.end == pytest.approx(1334.58)
    assert rec.chunk_times[0] == pytest.approx(1334.55)
    after = (rec.ttft, rec.tpot, rec.e2e, rec.schedule_lag)
    assert after == pytest.approx(before, abs=1e-9)
    s = shift_sample(
        Sample(5.0, "process.cpu_percent", 12.0, {"name": "loadgen"}), 2.0, {"host": "b"}
    )
    assert s.t == 7.0 and s.labels == {"name": "loadgen", "host": "b"}


@settings(max_examples=100, deadline=None)
@given(
    concurrency=st.integers(min_value=1, max_value=20),
    workers=st.integers(min_value=1, max_value=8),
    limit=st.integers(min_value=0, max_value=300),
)
def test_closed_loop_indices_are_dealt_once_in_proportion_to_users(
    concurrency: int, workers: int, limit: int
) -> None:
    # The users split as split_work splits them: the first ones get one more.
    users = [
        concurrency // workers + (1 if w < concurrency % workers else 0) for w in range(workers)
    ]
    first = [sum(users[:w]) for w in range(workers)]
    dealt = [list(owned_indices(first[w], users[w], concurrency, limit)) for w in range(workers)]
    everything = sorted(i for d in dealt for i in d)
    assert everything == list(range(limit))
    for w in range(workers):
        share = users[w] / concurrency * limit
        assert math.floor(share) - users[w] <= len(dealt[w]) <= math.ceil(share) + users[w]


def _rec(i: int, worker: str, lag: float) -> RequestRecord:
    t = i * 0.1
    return RequestRecord(
        request_id=f"r-{i}",
        scheduled=t,
        sent=t + lag,
        chunk_times=[t + 0.05, t + 0.06],
        chunk_tokens=[1, 1],
        end=t + 0.07,
        ok=True,
        completion_tokens=2,
        labels={"worker": worker},
    )


def test_one_slow_worker_is_flagged_by_name_though_the_merged_lag_passes() -> None:
    # 40 requests from a prompt worker and 2 late ones from another: the merged p99
    # stays under 5 ms, the late worker's own p99 does not.
    recs = [_rec(i, "0", 0.001) for i in range(98)] + [_rec(98, "1", 0.001), _rec(99, "1", 0.03)]
    workers: dict[str, dict[str, Any]] = {
        "0": {"host": "gen-a", "cpu_percent": 20.0},
        "1": {"host": "gen-b", "cpu_percent": 95.0},
    }
    merged = aggregate(recs, target_rate=10.0, loadgen_cpu_percent=20.0)
    assert not merged["client_limited"]["flag"]
    agg = aggregate(recs, target_rate=10.0, loadgen_cpu_percent=20.0, workers=workers)
    cl = agg["client_limited"]
    assert cl["flag"]
    by = {w["worker"]: w for w in cl["workers"]}
    assert not by["0"]["flag"] and by["1"]["flag"]
    assert any("worker 1 on gen-b: schedule lag p99" in r for r in cl["reasons"])
    assert any("worker 1 on gen-b: load generator CPU 95%" in r for r in cl["reasons"])
    assert by["0"]["requests"] == 98 and by["1"]["requests"] == 2
