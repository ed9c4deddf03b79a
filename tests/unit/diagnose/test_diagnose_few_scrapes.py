"""A window with fewer engine scrapes than ``MIN_SCRAPES`` (a short level at the default
1 s sampling): its one or two scrapes are instants, not the window. The client's exact
in-flight count, set against the slot limit, times the queue; the curve takes its
running count from the client. A scrape that lands on a closed-loop handover once made
``diagnose`` call a level where half the clients waited "healthy" (CI, 2026-12-05)."""

from __future__ import annotations

from itertools import pairwise

import numpy as np
from diag_fixtures import one
from engine_sim import T0, Req, build, signals, simulate
from hypothesis import given, settings
from hypothesis import strategies as st

from infersight.diagnose import diagnose
from infersight.diagnose.curve_builder import level_point
from infersight.diagnose.inflight import InFlight
from infersight.diagnose.signals import RecordArrays, SampleIndex
from infersight.stats.aggregate import aggregate


def _handover(users: int, slots: int) -> tuple[list[Req], float]:
    """A closed loop of ``users`` on ``slots`` whose engine front holds each new request
    0.15 s, and one scrape 0.05 s after a round ended: the queued requests have just
    taken the slots, the new ones are still in the front, so the engine lists none
    waiting. Returns the run's requests and that scrape's instant."""
    reqs = simulate(users=users, slots=slots, front=[0.15], service=0.2, duration=1.2)
    mid = sorted(q.end for q in reqs if T0 + 0.5 < q.end < T0 + 0.9)[0]
    return reqs, mid + 0.05


def test_one_scrape_on_a_handover_does_not_hide_a_queue() -> None:
    reqs, at = _handover(8, 4)
    run = build(reqs, [at], slots=4, users=8)
    (waiting,) = [x.value for x in run.samples if x.name == "engine.requests_waiting"]
    assert waiting == 0.0  # the premise: the one scrape lists no one waiting
    s = signals(run, T0, T0 + 1.2)
    assert s.S == 4.0 and s.R is not None and 3.9 < s.R <= 4.0, s.rq_source
    # half the clients wait nearly all the time; the one scrape read none waiting
    assert s.Q is not None and s.Q > 3.0 and s.Q_frac is not None and s.Q_frac >= 0.8
    assert "1 scrape in this 1.2 s window, too few" in s.rq_source
    v = one(diagnose(run), "slot_bound")
    assert v.evidence_value("waiting") > 3.0


def test_the_same_instant_among_enough_scrapes_is_the_engines_word() -> None:
    # Three or more scrapes are the engine's gauges over the window, as before.
    reqs, at = _handover(8, 4)
    s = signals(build(reqs, [at - 0.3, at, at + 0.3], slots=4, users=8), T0, T0 + 1.2)
    assert s.rq_source.startswith("engine /metrics")


def test_a_level_with_two_scrapes_takes_its_running_count_from_the_client() -> None:
    # 4 clients on 4 slots: one scrape mid-round reads 4 running, the other lands on the
    # handover and reads 0. Their mean, 2, once made the time in the engine half what it
    # is, and the next level's "growth" in it a compute knee.
    reqs, at = _handover(4, 4)
    run = build(reqs, [at - 0.1, at], slots=4, users=4)
    read = [x.value for x in run.samples if x.name == "engine.requests_running"]
    assert read == [4.0, 0.0]  # the premise: the handover scrape reads none running
    ra, sidx = RecordArrays.build(run.records), SampleIndex(run.samples)
    idx = np.arange(len(run.records))
    agg = aggregate(run.records, target_concurrency=4)
    p = level_point("c=4", agg, ra, idx, sidx)
    assert p.inflight_source == "client" and p.inflight is not None and p.inflight > 3.5
    assert p.time_in_engine is not None and 0.3 < p.time_in_engine < 0.4  # front + service


def _brute(
    spans: list[tuple[float, float]], limit: float, t0: float, t1: float
) -> tuple[float, ...]:
    """The same figures from the count on every piece between two events."""
    cuts = sorted({t0, t1, *(t for s, e in spans for t in (s, e) if t0 < t < t1)})
    run = queued = frac = top = 0.0  # top: the most above the limit, never below 0
    for a, b in pairwise(cuts):
        n = sum(s <= a and e > a for s, e in spans)
        run += min(n, limit) * (b - a)
        queued += max(n - limit, 0.0) * (b - a)
        frac += (b - a) if n - limit >= 0.5 else 0.0
        top = max(top, n - limit)
    span = t1 - t0
    return run / span, queued / span, frac / span, top


@settings(max_examples=200, deadline=None)
@given(
    spans=st.lists(st.tuples(st.floats(0, 20), st.floats(0.01, 5)), min_size=1, max_size=30),
    limit=st.integers(1, 8),
    window=st.tuples(st.floats(0, 15), st.floats(0.5, 10)),
)
def test_split_matches_a_count_piece_by_piece(
    spans: list[tuple[float, float]], limit: int, window: tuple[float, float]
) -> None:
    pairs = [(s, s + d) for s, d in spans]
    t0, t1 = window[0], window[0] + window[1]
    sent = np.array([s for s, _ in pairs])
    end = np.array([e for _, e in pairs])
    probe = InFlight.build(sent, end, np.full(sent.size, np.nan), np.zeros(sent.size, bool))
    got = probe.split(float(limit), t0, t1)
    want = _brute(pairs, float(limit), t0, t1)
    assert np.allclose(got, want, atol=1e-9)
