"""The relative client-limited flag, its headline, and the notes beside a level."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

from hypothesis import given
from hypothesis import strategies as st

from infersight.bench.colocation import cpu_contention
from infersight.core.records import RequestRecord, RunResult
from infersight.stats.aggregate import Window, aggregate, client_headline, level_notes
from infersight.stats.level_flags import over_limit
from infersight.telemetry.server_process import listening_pid
from support.queue_sim import simulate


def _lagged(recs: list[RequestRecord], lag: float) -> list[RequestRecord]:
    for r in recs:
        r.sent = r.scheduled + lag
    return recs


def test_lag_is_judged_against_the_latency_it_distorts() -> None:
    # Issue 10, item 4: 8 ms of lag beside a TTFT of seconds is no client problem.
    slow = _lagged(simulate(slots=4, service=4.0, rate=0.8, duration=40).records, 0.008)
    a = aggregate(slow, window=Window("auto"), target_rate=0.8)
    assert a["ttft"]["p50"] >= 1.0
    assert a["client_limited"]["flag"] is False
    assert a["client_limited"]["lag_limit"] == a["ttft"]["p50"] * 0.01
    # The same lag beside a 10 ms TTFT is: the client delayed every request by most of it.
    fast = _lagged(simulate(slots=2, service=0.04, rate=20, duration=10).records, 0.008)
    b = aggregate(fast, window=Window("auto"), target_rate=20.0)
    assert b["client_limited"]["flag"] is True
    assert "schedule lag p99 8.0 ms > 5.0 ms" in b["client_limited"]["reasons"][0]


def test_a_lag_just_over_its_limit_shows_the_two_apart() -> None:
    # The demo once printed "schedule lag p99 5.0 ms > 5.0 ms": true, and read as a bug.
    recs = _lagged(simulate(slots=2, service=0.04, rate=20, duration=10).records, 0.00504)
    a = aggregate(recs, window=Window("auto"), target_rate=20.0)
    assert a["client_limited"]["lag_limit"] == 0.005
    assert "schedule lag p99 5.04 ms > 5.00 ms" in a["client_limited"]["reasons"][0]


@given(
    limit=st.floats(1e-3, 10.0),
    over=st.floats(0.0, 1.0, exclude_min=True),
    nd=st.integers(0, 2),
)
def test_a_value_over_its_limit_is_shown_apart_from_it(limit: float, over: float, nd: int) -> None:
    value = limit * (1 + over)
    text = over_limit(value, limit, " u", nd=nd)
    a, sign, b = text.replace(" u", "").split(" ")
    # each shown number is its value rounded, to the same decimals
    decimals = len(a.split(".")[1]) if "." in a else 0
    assert nd <= decimals <= nd + 2 and len(b.split(".")[1] if "." in b else "") == decimals
    assert abs(float(a) - value) <= 0.5 * 10**-decimals + 1e-9 * value
    assert abs(float(b) - limit) <= 0.5 * 10**-decimals + 1e-9 * limit
    if sign == ">":
        assert float(a) > float(b)
    else:  # shown equal only when they are equal to the last decimal shown
        assert sign == "\u2265" and a == b and decimals == nd + 2


def test_starved_client_by_cpu_or_send_rate_and_all_at_once_levels() -> None:
    recs = simulate(slots=2, service=0.5, rate=2, duration=20).records
    cpu = aggregate(recs, target_rate=2.0, loadgen_cpu_percent=97.0)
    assert cpu["client_limited"]["flag"] and "CPU 97%" in cpu["client_limited"]["reasons"][0]
    # A client that could only send at half the rate: each send slips a little more.
    slipping = [r for r in recs]
    for i, r in enumerate(slipping):
        r.sent = r.scheduled + i * 0.25
    rate = aggregate(slipping, target_rate=2.0)
    assert any("achieved send rate" in x for x in rate["client_limited"]["reasons"])
    # Everything at once: lag is the time to send them all, by design, not judged.
    burst = _lagged(simulate(slots=2, service=0.05, rate=1e6, duration=2e-5).records, 0.05)
    assert aggregate(burst, check_lag=False)["client_limited"]["flag"] is False
    assert aggregate(burst)["client_limited"]["flag"] is True


def test_contention_is_named_in_reasons_and_headline() -> None:
    recs = _lagged(simulate(slots=2, service=0.04, rate=20, duration=10).records, 0.008)
    phrase = "the client and the embedded engine share 2 cores"
    a = aggregate(recs, window=Window("auto"), target_rate=20.0, contention=phrase)
    reasons = a["client_limited"]["reasons"]
    assert a["client_limited"]["flag"] and all(phrase in r for r in reasons)
    result = RunResult(client_limited=True, client_limited_reasons=reasons)
    head = client_headline(result)
    assert head is not None and head[0] == "CLIENT-LIMITED"
    result.environment["cpu_contention"] = phrase
    head = client_headline(result)
    assert head is not None and head[0] == "CLIENT AND SERVER SHARE CORES"
    assert phrase in head[1] and "load generator, not the server" not in head[1]
    assert head[1].count(phrase) == 1  # named once, not again in every reason
    assert client_headline(RunResult()) is None


def test_level_notes_name_the_window_and_unsustainable_levels() -> None:
    sim = simulate(slots=4, service=0.24, rate=33, duration=10)
    a = aggregate(sim.records, window=Window("auto"), target_rate=33.0)
    kinds = dict(level_notes("r=33", a))
    assert (
        "Capacity ≈ 16.6 req/s" in kinds["unsustainable"]
        or "Capacity ≈ 16.7" in kinds["unsustainable"]
    )
    assert f"{a['requests']['in_window']} of {a['requests']['total']} requests" in kinds["window"]
    small = aggregate(sim.records[:8], window=Window("auto"), target_concurrency=8)
    assert [k for k, _ in level_notes("c=8", small)] == ["no_steady_state"]


def test_colocation_finds_the_server_on_this_machine() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert listening_pid(f"http://127.0.0.1:{port}") == os.getpid()
        assert listening_pid(f"http://localhost:{port}/v1") == os.getpid()
    assert listening_pid("http://10.255.255.1:8000") is None
    assert listening_pid("https://api.example.com") is None
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        phrase = cpu_contention("http://10.255.255.1:8000", child.pid)
        assert phrase is not None and phrase.startswith("the client and the embedded engine share")
        n = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        assert f"share {n} core" in phrase
    finally:
        child.kill()
        child.wait()
    assert cpu_contention("http://10.255.255.1:8000", None) is None
