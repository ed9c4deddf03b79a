"""Requests the client has in flight that the engine does not report (docs/design.md section 5:
"Q includes requests the client holds in flight that the engine does not report"):
counted at each scrape, among requests the engine must have seen, and only when
sustained. A closed-loop handover caught by one scrape is not a queue; an HTTP accept
backlog the engine hides still is."""

from __future__ import annotations

import numpy as np
from diag_fixtures import ids, one
from engine_sim import T0, build, signals, simulate
from hypothesis import given, settings
from hypothesis import strategies as st

from infersight.diagnose import diagnose
from infersight.diagnose.inflight import InFlight

QUEUE_IDS = {"slot_bound", "kv_bound", "capacity"}


def test_a_handover_caught_by_one_of_three_scrapes_is_not_a_queue() -> None:
    # 4 users on 8 slots, in lock step: each round the engine's HTTP front holds all
    # four for 0.15 s before its scheduler sees them. The third scrape lands there and
    # reads 0 running while the client has 4 in flight. The old comparison (the
    # client's mean in flight 4.0 against the scrapes' mean 2.7) read 1.3 waiting and
    # called a "capacity" queue on an engine with 5 idle slots (CI, 2026-11-30).
    reqs = simulate(users=4, slots=8, front=[0.15], service=0.85, duration=3.0)
    run = build(reqs, [T0 + 0.5, T0 + 1.5, T0 + 2.05], slots=8, users=4)
    s = signals(run, T0, T0 + 2.9)
    assert s.R is not None and abs(s.R - 8 / 3) < 1e-9  # the scrapes as they were
    assert s.Q == 0.0 and s.queued_outside is None, s.rq_source
    vs = diagnose(run)
    assert not QUEUE_IDS & set(ids(vs)), [v.summary for v in vs]


def test_requests_younger_than_the_fastest_first_token_are_not_counted() -> None:
    # Every scrape lands in the handover: a comparison without the age rule would see
    # 4 waiting at all of them. No request answered its first token in under 0.18 s,
    # so none of them can be told from one the engine is still reading.
    reqs = simulate(users=4, slots=8, front=[0.15], service=0.85, duration=4.0)
    s = signals(
        build(reqs, [T0 + 0.05, T0 + 1.05, T0 + 2.05, T0 + 3.05], slots=8, users=4), T0, T0 + 3.9
    )
    assert s.R == 0.0 and s.Q == 0.0 and s.queued_outside is None


def test_a_gap_at_a_minority_of_scrapes_is_not_sustained() -> None:
    # The first round is fast (settle 0.04 s), later handovers take 0.3 s: the scrape at
    # +2.2 s sees four requests 0.1 s old, past the settle time, that the engine has not
    # taken in yet. One scrape in three is not a sustained queue.
    reqs = simulate(users=4, slots=8, front=[0.01, 0.3], service=0.7, duration=3.0)
    handover = next(q.sent for q in reqs if q.arrival - q.sent > 0.2 and q.sent > T0 + 1.5)
    run = build(reqs, [T0 + 0.5, T0 + 1.6, handover + 0.1], slots=8, users=4)
    s = signals(run, T0, T0 + 2.9)
    assert s.R is not None and s.R < 3.0  # the gap is there...
    assert s.Q == 0.0 and s.queued_outside is None  # ...but not sustained
    vs = diagnose(run)
    assert not QUEUE_IDS & set(ids(vs)), [v.summary for v in vs]


def test_a_backlog_the_engine_hides_is_still_a_queue() -> None:
    # 12 users on 4 slots, and an engine that lists none of the 8 it cannot run (they
    # wait in its HTTP accept backlog): the client's count at each scrape shows them.
    reqs = simulate(users=12, slots=4, front=[0.02], service=0.5, duration=20.0)
    scrapes = [T0 + 0.37 + i for i in range(19)]
    run = build(reqs, scrapes, slots=4, users=12, hide_waiting=True)
    s = signals(run, T0 + 2, T0 + 18)
    assert s.R == 4.0
    assert s.queued_outside is not None and s.Q is not None and 7.0 <= s.Q <= 8.0
    assert s.Q_frac == 1.0 and "before the engine's scheduler" in s.rq_source
    v = one(diagnose(run), "slot_bound")
    assert v.evidence_value("waiting") >= 7.0
    # The same engine listing its queue gives the same figure from its own gauge.
    shown = signals(build(reqs, scrapes, slots=4, users=12), T0 + 2, T0 + 18)
    assert shown.queued_outside is None and shown.Q is not None and 7.0 <= shown.Q <= 8.0


def test_a_hidden_backlog_shows_the_slot_limit_of_an_engine_that_exports_none() -> None:
    # vLLM-shaped (no slot limit exported) behind a proxy that queues: running stays at 4
    # while the client has 12 in flight, so R's plateau with the outside queue names
    # the limit, scrape by scrape.
    reqs = simulate(users=12, slots=4, front=[0.02], service=0.5, duration=20.0)
    run = build(
        reqs,
        [T0 + 0.37 + i for i in range(19)],
        slots=4,
        users=12,
        hide_waiting=True,
        engine="vllm",
    )
    s = signals(run, T0 + 2, T0 + 18)
    assert s.plateau is not None and s.plateau.slots == 4 and 7.0 <= s.plateau.waiting <= 8.0
    v = one(diagnose(run), "slot_bound")
    assert "the slot limit is 4" in str(v.evidence_value("slot limit (inferred)"))


def _brute(sent: list[float], end: list[float | None], settle: float, t: float, dt: float) -> int:
    return sum(
        s <= t - settle and (e is None or e >= t + dt) for s, e in zip(sent, end, strict=True)
    )


@settings(max_examples=300, deadline=None)
@given(
    spans=st.lists(
        st.tuples(st.floats(0, 50), st.one_of(st.none(), st.floats(0, 10))), max_size=40
    ),
    settle=st.floats(0, 3),
    probes=st.lists(st.tuples(st.floats(-5, 65), st.floats(0, 2)), min_size=1, max_size=20),
)
def test_inflight_counts_match_a_direct_count(
    spans: list[tuple[float, float | None]], settle: float, probes: list[tuple[float, float]]
) -> None:
    sent = [s for s, _ in spans]
    end = [None if d is None else s + d for s, d in spans]
    nan = float("nan")
    probe = InFlight(
        sent=np.sort(np.array(sent, dtype=float)),
        end_by_sent=np.array(
            [
                np.inf if e is None else e
                for _, e in sorted(zip(sent, end, strict=True), key=lambda p: p[0])
            ],
            dtype=float,
        ),
        ends=np.sort(np.array([np.inf if e is None else e for e in end], dtype=float)),
        settle=settle,
    )
    got = probe.count(np.array([t for t, _ in probes]), np.array([d for _, d in probes]), settle)
    want = [_brute(sent, end, settle, t, d) for t, d in probes]
    assert got.tolist() == want
    # build() from record columns gives the same structure (unsent requests left out)
    cols = np.array([[*sent, nan], [nan if e is None else e for e in end] + [nan]])
    built = InFlight.build(
        cols[0], cols[1], np.full(len(sent) + 1, nan), np.zeros(len(sent) + 1, bool)
    )
    assert built.settle == 0.0
    assert built.count(np.array([t for t, _ in probes]), np.zeros(len(probes))).tolist() == [
        _brute(sent, end, 0.0, t, 0.0) for t, _ in probes
    ]


def test_settle_is_the_fastest_first_token_of_answered_requests() -> None:
    sent = np.array([0.0, 1.0, 2.0, np.nan])
    first = np.array([0.5, 1.2, np.nan, np.nan])
    ok = np.array([True, True, False, False])
    probe = InFlight.build(sent, sent + 1.0, first, ok)
    assert abs(probe.settle - 0.2) < 1e-12  # the failed request's send is no first token
    assert probe.sent.tolist() == [0.0, 1.0, 2.0]  # the unsent one is left out
