"""Properties of the shared adaptive law, whatever the server and the history."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from infersight.control import AdaptiveConcurrency

#: (what happens, gap before it in s, latency in s) for one request.
events = st.lists(
    st.tuples(
        st.sampled_from(["ok", "congestion", "other error"]),
        st.floats(min_value=0.0, max_value=2.0),
        st.floats(min_value=0.0, max_value=5.0),
    ),
    max_size=200,
)


def replay(ctrl: AdaptiveConcurrency, evs: list[tuple[str, float, float]]) -> float:
    """Feed ``evs`` to ``ctrl``; the time of the last one."""
    now = 0.0
    for kind, gap, lat in evs:
        now += gap
        ctrl.on_send(now - lat)
        if kind == "ok":
            ctrl.on_success(now, started=now - lat, latency=lat)
        else:
            ctrl.on_error(now, started=now - lat, kind=kind, congestion=kind == "congestion")
    return now


def healthy_rounds(ctrl: AdaptiveConcurrency, now: float, latency: float, rounds: int) -> float:
    """A server with no knee: every request of a round takes ``latency``, however many."""
    for _ in range(rounds):
        n = ctrl.limit
        for _ in range(n):
            ctrl.on_send(now)
        for i in range(n):
            ctrl.on_success(now + latency + i * 1e-6, started=now, latency=latency)
        now += latency + n * 1e-6
    return now


@settings(max_examples=200, deadline=None)
@given(evs=events, initial=st.integers(1, 300), minimum=st.integers(1, 8), span=st.integers(0, 200))
def test_the_limit_stays_within_its_bounds(
    evs: list[tuple[str, float, float]], initial: int, minimum: int, span: int
) -> None:
    maximum = minimum + span
    ctrl = AdaptiveConcurrency(now=0.0, initial=initial, minimum=minimum, maximum=maximum)
    assert minimum <= ctrl.limit <= maximum
    now = replay(ctrl, evs)
    assert minimum <= ctrl.limit <= maximum
    healthy_rounds(ctrl, now, 0.2, 30)
    assert minimum <= ctrl.limit <= maximum


@settings(max_examples=200, deadline=None)
@given(evs=events, initial=st.integers(1, 300), backoff=st.floats(0.1, 0.9))
def test_it_backs_off_on_congestion(
    evs: list[tuple[str, float, float]], initial: int, backoff: float
) -> None:
    """A congestion error of a request sent after the last cut cuts x backoff, whatever
    came before."""
    ctrl = AdaptiveConcurrency(now=0.0, initial=initial, backoff=backoff)
    now = replay(ctrl, evs) + 1.0
    before = ctrl.limit
    ctrl.on_send(now)
    ctrl.on_error(now + 0.1, started=now, kind="RateLimited", congestion=True)
    assert ctrl.limit == max(ctrl.minimum, math.floor(before * backoff))
    assert ctrl.limit < before or before == ctrl.minimum


@settings(max_examples=50, deadline=None)
@given(
    initial=st.integers(1, 16),
    maximum=st.integers(16, 128),
    latency=st.floats(min_value=0.05, max_value=2.0),
)
def test_it_grows_to_the_maximum_while_the_server_keeps_up(
    initial: int, maximum: int, latency: float
) -> None:
    ctrl = AdaptiveConcurrency(now=0.0, initial=initial, maximum=maximum)
    rounds = 150 + int(0.5 / latency) * 40  # windows last at least 0.5 s
    healthy_rounds(ctrl, 0.0, latency, rounds)
    # At the top it still probes one step down now and then, and comes back.
    assert ctrl.limit >= math.floor(0.75 * maximum)
    assert max(lim for _, lim in ctrl.history) == maximum
