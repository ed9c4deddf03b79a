"""aggregate(): metric definitions, windows, SLOs, client-limited flag, merge."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infersight.core.errors import ConfigError
from infersight.core.records import RequestRecord
from infersight.stats.aggregate import Window, aggregate

KEYS = {
    "window",
    "requests",
    "success_rate",
    "request_throughput",
    "output_token_throughput",
    "goodput",
    "ttft",
    "ttft_from_sent",
    "e2e",
    "e2e_from_sent",
    "tpot",
    "itl",
    "itl_per_request",
    "schedule_lag",
    "queue_delay",
    "errors_by_type",
    "tokens",
    "target",
    "achieved_rate",
    "client_limited",
}


def make(
    i: int,
    scheduled: float,
    *,
    lag: float = 0.001,
    ttft: float = 0.05,
    itl: float = 0.01,
    n: int = 5,
    tokens_per_chunk: int = 1,
    ok: bool = True,
    error: str | None = None,
) -> RequestRecord:
    sent = scheduled + lag
    chunks = [sent + ttft + k * itl for k in range(n)]
    return RequestRecord(
        request_id=f"r{i}",
        scheduled=scheduled,
        sent=sent,
        headers=sent + ttft / 2,
        chunk_times=chunks if ok else chunks[:1],
        chunk_tokens=[tokens_per_chunk] * (n if ok else 1),
        end=chunks[-1] + 0.001,
        status=200 if ok else 500,
        ok=ok,
        error=error,
        error_message=None if ok else f"boom {i}",
        prompt_tokens=10,
        completion_tokens=n * tokens_per_chunk if ok else None,
    )


def test_output_keys_and_definitions() -> None:
    recs = [make(i, i * 0.1) for i in range(20)]
    a = aggregate(recs)
    assert set(a) >= KEYS
    assert a["requests"] == {
        "total": 20,
        "ok": 20,
        "errors": 0,
        "cancelled": 0,
        "in_window": 20,
        "in_window_ok": 20,
        "completions_in_span": 20,
    }
    assert a["ttft"]["p50"] == pytest.approx(0.051)  # from the intended send time
    assert a["ttft_from_sent"]["p50"] == pytest.approx(0.05)
    assert a["tpot"]["p50"] == pytest.approx(0.01)
    assert a["itl"]["count"] == 20 * 4
    assert a["schedule_lag"]["max"] == pytest.approx(0.001)
    assert a["goodput"] is None
    assert a["client_limited"]["flag"] is False


def test_pooled_itl_weights_multi_token_chunks() -> None:
    # 3 chunks of 2 tokens: 2 gaps of 10 ms, each counted twice; TPOT is per token.
    r = make(0, 0.0, n=3, tokens_per_chunk=2)
    a = aggregate([r])
    assert a["itl"]["count"] == 4
    assert a["itl_per_request"]["count"] == 1
    assert a["tpot"]["p50"] == pytest.approx(0.02 / 5)


def test_errors_by_type_and_success_rate() -> None:
    recs = [make(i, i * 0.1) for i in range(8)]
    recs += [make(10 + i, 1.0 + i * 0.1, ok=False, error="ServerError") for i in range(2)]
    a = aggregate(recs)
    assert a["success_rate"] == pytest.approx(0.8)
    assert a["errors_by_type"] == {"ServerError": {"count": 2, "example": "boom 10"}}


def test_goodput_and_slo_verdict() -> None:
    recs = [make(i, i * 0.1, ttft=0.05 if i % 2 else 0.5) for i in range(20)]
    a = aggregate(recs, slo={"ttft_p99": 0.1})
    lo, hi = a["window"]["throughput_span"]  # first send to the last completion
    assert hi == pytest.approx(max(r.end or 0 for r in recs))
    assert a["goodput"] == pytest.approx(10 / (hi - lo))
    assert a["slo"]["met"] is False
    assert a["slo"]["checks"]["ttft_p99"]["value"] > 0.1


def test_client_limited_by_lag_and_cpu() -> None:
    recs = [make(i, i * 0.1, lag=0.02) for i in range(20)]
    a = aggregate(recs, target_rate=10.0, loadgen_cpu_percent=95.0)
    reasons = " ".join(a["client_limited"]["reasons"])
    assert a["client_limited"]["flag"]
    assert "schedule lag" in reasons and "CPU" in reasons


def test_client_limited_by_achieved_rate() -> None:
    # Scheduled at 10/s but sent at 5/s (lag grows linearly).
    recs = [make(i, i * 0.1, lag=i * 0.1) for i in range(20)]
    a = aggregate(recs, target_rate=10.0)
    assert any("achieved send rate" in x for x in a["client_limited"]["reasons"])


def test_time_and_count_windows() -> None:
    # Membership by intended send time: sends at 0..39 s, cut 2 s at each end.
    recs = [make(i, i * 1.0) for i in range(40)]
    a = aggregate(recs, window=Window.parse("2s", "2s"))
    assert a["window"]["method"].startswith("time")
    assert a["window"]["steady"] is True
    assert a["requests"]["in_window"] == 40 - 2 - 2
    b = aggregate(recs, window=Window.parse("2", "3"))
    assert b["requests"]["in_window"] == 40 - 2 - 3
    # Too few requests left: every request counts, and the window says so.
    c = aggregate(recs[:10], window=Window.parse("2s", "2s"))
    assert c["requests"]["in_window"] == 10
    assert c["window"]["steady"] is False and "no steady state" in c["window"]["note"]
    with pytest.raises(ConfigError):
        Window.parse("2s", "3")


def test_auto_window_closed_loop() -> None:
    # Concurrency 2: two users, each sending back to back (0.3 s per request); the
    # second starts 0.5 s late and stops after 20 requests, the first goes on to 30.
    recs = []
    for u in range(2):
        t = 0.5 * u
        for _k in range(30 if u == 0 else 20):
            recs.append(make(len(recs), t, lag=0.0, ttft=0.1, itl=0.05, n=5))
            t = recs[-1].end or 0.0
    a = aggregate(recs, window=Window("auto"), target_concurrency=2)
    w = a["window"]
    assert w["method"].startswith("auto") and w["steady"] is True
    assert w["start"] == pytest.approx(0.5)
    last_of_second = max(r.end or 0 for r in recs[30:])
    # The window ends at the last send before in-flight falls for good.
    assert w["end"] == max(r.scheduled for r in recs if r.scheduled <= last_of_second)
    members = [r for r in recs if w["start"] <= r.scheduled <= w["end"]]
    assert a["requests"]["in_window"] == len(members) >= 20
    assert a["ttft"]["count"] == len(members)
    # Too few requests at the target: no steady state, every request counts.
    b = aggregate(recs[:5] + recs[30:33], window=Window("auto"), target_concurrency=2)
    assert b["window"]["steady"] is False and b["requests"]["in_window"] == 8


record_params = st.lists(
    st.tuples(
        st.floats(0, 100),
        st.floats(0, 0.01),
        st.floats(0.001, 1),
        st.floats(0.001, 0.1),
        st.integers(1, 8),
        st.booleans(),
    ),
    min_size=1,
    max_size=40,
)


@given(record_params, st.integers(1, 4), st.integers(0, 2**32 - 1))
@settings(max_examples=60, deadline=None)
def test_worker_merge_gives_same_aggregates(params: list[tuple], workers: int, seed: int) -> None:
    recs = [
        make(i, s, lag=lag, ttft=ttft, itl=itl, n=n, ok=ok, error=None if ok else "ReadError")
        for i, (s, lag, ttft, itl, n, ok) in enumerate(params)
    ]
    one = aggregate(recs, slo={"ttft_p99": 0.5}, target_rate=2.0)
    rng = random.Random(seed)
    parts: list[list[RequestRecord]] = [[] for _ in range(workers)]
    for r in recs:
        parts[rng.randrange(workers)].append(r)
    merged = [r for part in reversed(parts) for r in part]
    assert aggregate(merged, slo={"ttft_p99": 0.5}, target_rate=2.0) == one
