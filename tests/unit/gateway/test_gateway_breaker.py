"""Circuit breaker: closed -> open -> half-open probes -> closed/open."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from infersight.gateway.breaker import BreakerState, CircuitBreaker


def test_full_cycle() -> None:
    t = [0.0]
    changes: list[BreakerState] = []
    b = CircuitBreaker(
        failures=3, cooldown=5.0, probes=1, clock=lambda: t[0], on_change=changes.append
    )
    for _ in range(2):
        assert b.allow()
        b.record_failure()
    assert b.state is BreakerState.CLOSED
    b.record_failure()
    assert b.state is BreakerState.OPEN and not b.allow() and not b.available()
    assert b.seconds_until_probe() == 5.0
    t[0] = 5.0
    assert b.state is BreakerState.HALF_OPEN
    assert b.allow()  # the one probe
    assert not b.allow()  # no second probe while it is out
    b.record_failure()  # probe failed: open again
    assert b.state is BreakerState.OPEN
    t[0] = 10.0
    assert b.allow()
    b.record_success()
    assert b.state is BreakerState.CLOSED and b.allow()
    assert changes == [
        BreakerState.OPEN,
        BreakerState.HALF_OPEN,
        BreakerState.OPEN,
        BreakerState.HALF_OPEN,
        BreakerState.CLOSED,
    ]


def test_success_resets_the_failure_count() -> None:
    b = CircuitBreaker(failures=2)
    b.record_failure()
    b.record_success()
    b.record_failure()
    assert b.state is BreakerState.CLOSED


def test_neutral_outcome_returns_the_probe() -> None:
    t = [0.0]
    b = CircuitBreaker(failures=1, cooldown=1.0, clock=lambda: t[0])
    b.record_failure()
    t[0] = 1.0
    assert b.allow() and not b.allow()
    b.record_neutral()
    assert b.allow()


@given(st.lists(st.sampled_from(["ok", "fail", "tick"]), max_size=60))
def test_opens_only_after_threshold_consecutive_failures(events: list[str]) -> None:
    t = [0.0]
    b = CircuitBreaker(failures=3, cooldown=2.0, clock=lambda: t[0])
    consecutive = 0
    for ev in events:
        if ev == "tick":
            t[0] += 1.0
            continue
        if not b.allow():
            assert b.state is not BreakerState.CLOSED
            continue
        was = b.state
        if ev == "ok":
            b.record_success()
            consecutive = 0
            assert b.state is BreakerState.CLOSED
        else:
            b.record_failure()
            consecutive += 1
            if was is BreakerState.HALF_OPEN or consecutive >= 3:
                assert b.state is BreakerState.OPEN
            else:
                assert b.state is BreakerState.CLOSED


def test_outcomes_of_requests_sent_before_opening_are_ignored() -> None:
    t = [0.0]
    b = CircuitBreaker(failures=1, cooldown=5.0, clock=lambda: t[0])
    b.record_failure()
    assert b.state is BreakerState.OPEN
    b.record_success()  # a slow request that started while closed
    assert b.state is BreakerState.OPEN
    t[0] = 3.0
    b.record_failure()  # stale failure does not extend the cooldown
    t[0] = 5.0
    assert b.state is BreakerState.HALF_OPEN


def test_own_opens_are_announced_and_remote_opens_are_not() -> None:
    t = [0.0]
    opened: list[float] = []
    b = CircuitBreaker(failures=1, cooldown=5.0, clock=lambda: t[0])
    b.on_open = opened.append
    assert b.open_for(2.0)  # another replica's evidence: open, not announced again
    assert b.state is BreakerState.OPEN and b.seconds_until_probe() == 2.0 and opened == []
    assert not b.open_for(1.0)  # already open longer
    assert b.open_for(3.0) and b.seconds_until_probe() == 3.0
    t[0] = 3.0
    assert b.state is BreakerState.HALF_OPEN and b.allow()
    b.record_failure()  # its own probe failed: open for the local cooldown, announced
    assert b.state is BreakerState.OPEN and opened == [5.0]
    t[0] = 8.0
    assert b.allow()
    b.record_success()
    assert b.state is BreakerState.CLOSED
    assert not b.open_for(0.0) and b.state is BreakerState.CLOSED
    assert b.open_for(12.0) and b.seconds_until_probe() == 12.0  # longer than its cooldown
    t[0] = 19.9
    assert b.state is BreakerState.OPEN
    t[0] = 20.0
    assert b.state is BreakerState.HALF_OPEN
