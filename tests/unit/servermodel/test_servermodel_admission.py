"""FIFO admission replayed from a run's arrivals and ends (docs/design.md section 9)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from infersight.servermodel.admission import arrival_order, reconstruct, running_at, violations

_times = st.lists(st.tuples(st.floats(0, 10), st.floats(0.001, 3)), min_size=1, max_size=60)


@settings(max_examples=60, deadline=None)
@given(_times, st.integers(1, 8))
def test_replayed_admission_never_runs_more_than_the_slots_and_stays_fifo(
    reqs: list[tuple[float, float]], slots: int
) -> None:
    arrival = np.array([a for a, _ in reqs])
    service = np.array([s for _, s in reqs])
    # ends as a FIFO server of `slots` would produce them
    order = np.argsort(arrival, kind="stable")
    free = [0.0] * slots
    end = np.empty(arrival.size)
    prev = 0.0
    for i in order:
        j = int(np.argmin(free))
        start = max(arrival[i], free[j], prev)
        prev = start
        end[i] = free[j] = start + service[i]
    start = reconstruct(arrival, end, slots)
    assert np.all(start >= arrival - 1e-12)
    assert np.all(np.diff(start[order]) >= -1e-12)  # FIFO: never before the one ahead
    probe = np.sort(np.concatenate([start, end - 1e-9]))
    assert running_at(start, end, probe).max() <= slots
    # the true admissions are consistent: no first token before its slot was free
    assert violations(start, start + 0.5 * service, tolerance=1e-9) == 0


def test_unlimited_slots_admit_everyone_on_arrival() -> None:
    arrival = np.array([0.0, 0.1, 0.1, 0.2])
    end = arrival + 1.0
    assert np.array_equal(reconstruct(arrival, end, None), arrival)


def test_a_burst_of_sends_is_ordered_by_first_token() -> None:
    """Four clients that send together reach the server in some order; FIFO hands out
    first tokens in that order, so the first tokens say which it was."""
    arrival = np.array([0.0, 0.001, 0.002, 0.003])
    first = np.array([0.9, 0.3, 0.6, 0.1])
    assert arrival_order(arrival, first).tolist() == [3, 1, 2, 0]
    # sends far apart keep their order whatever the first tokens say
    spread = np.array([0.0, 1.0, 2.0, 3.0])
    assert arrival_order(spread, first).tolist() == [0, 1, 2, 3]


def test_one_slot_too_few_makes_first_tokens_impossible() -> None:
    """2 slots of 1 s each, requests every 0.25 s: replayed with 1 slot, requests get
    their first token (0.1 s after a real admission) before the replay admits them."""
    arrival = np.arange(12) * 0.25
    start = np.empty(12)
    free = [0.0, 0.0]
    for i, a in enumerate(arrival):
        j = int(np.argmin(free))
        start[i] = max(a, free[j])
        free[j] = start[i] + 1.0
    end, first = start + 1.0, start + 0.1
    assert violations(reconstruct(arrival, end, 2, first=first), first, 0.0) == 0
    assert violations(reconstruct(arrival, end, 1, first=first), first, 0.0) > 3
