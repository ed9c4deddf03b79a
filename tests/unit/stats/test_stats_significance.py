"""Comparing runs (docs/design.md section 2): the ratio interval, the call, the slices."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infersight.core.records import RequestRecord
from infersight.stats.aggregate import Window, aggregate
from infersight.stats.significance import (
    BETTER,
    NOT_COMPARED,
    RUN_MORE,
    SAME,
    WORSE,
    compare,
    confidence_text,
    decide,
    family_confidence,
    mean_interval,
    noise_floor,
    ratio_interval,
    repeat_groups,
)
from infersight.stats.slices import LevelData, metric_named, slice_values

values = st.lists(
    st.floats(min_value=0.5, max_value=100.0, allow_nan=False), min_size=2, max_size=30
)


@settings(max_examples=200, deadline=None)
@given(values, values, st.floats(min_value=0.1, max_value=10.0))
def test_ratio_interval_holds_the_ratio_is_symmetric_and_scales(
    a: list[float], b: list[float], c: float
) -> None:
    ratio, lo, hi = ratio_interval(a, b)
    assert ratio is not None and math.isclose(ratio, np.mean(b) / np.mean(a), rel_tol=1e-12)
    if lo is None or hi is None:
        return
    assert lo <= ratio * (1 + 1e-9) and ratio <= hi * (1 + 1e-9)
    # A over B is the inverse interval (Fieller's set is symmetric in the roles).
    # (When B's own mean is not clearly above 0, that interval is unbounded.)
    _, lo2, hi2 = ratio_interval(b, a)
    if lo2 is not None and hi2 is not None:
        assert math.isclose(lo2, 1 / hi, rel_tol=1e-6) and math.isclose(hi2, 1 / lo, rel_tol=1e-6)
    # Scaling B scales the interval: the call does not depend on units.
    _, lo3, hi3 = ratio_interval(a, [x * c for x in b])
    assert lo3 is not None and hi3 is not None
    assert math.isclose(lo3, lo * c, rel_tol=1e-6) and math.isclose(hi3, hi * c, rel_tol=1e-6)


def test_ratio_interval_covers_the_true_ratio_about_95_percent_of_the_time() -> None:
    rng = np.random.default_rng(1)
    hits = 0
    trials = 600
    for _ in range(trials):
        a = rng.normal(10.0, 1.5, 10)
        b = rng.normal(12.0, 3.0, 12)
        _, lo, hi = ratio_interval(a, b)
        assert lo is not None and hi is not None
        hits += lo <= 1.2 <= hi
    assert 0.92 <= hits / trials <= 0.98


def test_ratio_interval_edges() -> None:
    assert ratio_interval([], [1.0, 2.0]) == (None, None, None)
    assert ratio_interval([0.0, 0.0], [0.0, 0.0]) == (1.0, 1.0, 1.0)
    assert ratio_interval([0.0, 0.0], [1.0, 2.0]) == (None, None, None)
    assert ratio_interval([2.0, 2.0], [3.0, 3.0]) == (1.5, 1.5, 1.5)
    # A's mean is not clearly above 0: unbounded.
    r, lo, hi = ratio_interval([0.01, 5.0], [1.0, 1.1])
    assert r is not None and lo is None and hi is None
    assert ratio_interval([1.0], [2.0]) == (2.0, None, None)


@pytest.mark.parametrize(
    ("lo", "hi", "better", "call"),
    [
        (0.97, 1.04, "higher", SAME),
        (1.06, 1.3, "higher", BETTER),
        (1.06, 1.3, "lower", WORSE),
        (0.7, 0.94, "lower", BETTER),
        (0.7, 0.94, "higher", WORSE),
        (1.01, 1.2, "higher", RUN_MORE),  # above 1, but not wholly beyond δ
        (0.9, 1.1, "higher", RUN_MORE),
        (None, None, "higher", RUN_MORE),
    ],
)
def test_decide(lo: float | None, hi: float | None, better: str, call: str) -> None:
    assert decide(lo, hi, better, 0.05) == call


@settings(max_examples=100, deadline=None)
@given(
    st.floats(min_value=0.0, max_value=3.0),
    st.floats(min_value=0.0, max_value=3.0),
    st.floats(min_value=0.001, max_value=0.5),
)
def test_decide_is_a_mirror_image(lo: float, width: float, delta: float) -> None:
    hi = lo + width
    up, down = decide(lo, hi, "higher", delta), decide(lo, hi, "lower", delta)
    mirror = {BETTER: WORSE, WORSE: BETTER, SAME: SAME, RUN_MORE: RUN_MORE}
    assert down == mirror[up]
    if lo > 1 + delta:
        assert up == BETTER
    if lo >= 1 - delta and hi <= 1 + delta:
        assert up == SAME


def test_mean_interval_and_noise_floor() -> None:
    m, lo, hi = mean_interval([1.0, 2.0, 3.0])
    assert m == 2.0 and lo is not None and hi is not None and lo < 2.0 < hi
    assert mean_interval([4.0]) == (4.0, None, None)
    aa = compare_pair(rate=20.0, ttft=0.1)[0]
    assert noise_floor(aa) >= 0.01
    aa.low = None
    assert noise_floor(aa) == math.inf


def _open_loop(
    rate: float,
    seconds: float,
    ttft: float,
    *,
    seed: int,
    itl: float = 0.01,
    tokens: int = 8,
    jitter: float = 0.1,
) -> list[RequestRecord]:
    """Constant-rate sends; latency varies by ``jitter`` (lognormal sigma)."""
    rng = np.random.default_rng(seed)
    out = []
    n = int(rate * seconds)
    for i in range(n):
        t = 1000.0 + i / rate
        first = t + ttft * float(rng.lognormal(0.0, jitter))
        chunks = [first + k * itl * float(rng.lognormal(0.0, jitter)) for k in range(tokens)]
        chunks = list(np.maximum.accumulate(chunks))
        out.append(
            RequestRecord(
                f"r{seed}-{i}",
                scheduled=t,
                sent=t,
                headers=first,
                chunk_times=chunks,
                chunk_tokens=[1] * tokens,
                end=chunks[-1] + 1e-4,
                status=200,
                ok=True,
                completion_tokens=tokens,
                labels={"level": "r"},
            )
        )
    return out


def _level(recs: list[RequestRecord], rate: float) -> LevelData:
    return LevelData(recs, aggregate(recs, window=Window("auto"), target_rate=rate))


def compare_pair(rate: float, ttft: float, *, slower: float = 1.0, seconds: float = 12.0) -> list:
    a = _level(_open_loop(rate, seconds, ttft, seed=1), rate)
    b = _level(_open_loop(rate, seconds, ttft * slower, seed=2), rate)
    return compare([a], [b])


def test_two_runs_of_one_scenario_are_no_significant_difference() -> None:
    calls = {c.metric: c for c in compare_pair(rate=20.0, ttft=0.1)}
    for name in ("throughput", "ttft_p50", "tpot_p50", "e2e_p50"):
        assert calls[name].call == SAME, calls[name]
    assert calls["throughput"].basis == "slices" and calls["throughput"].units == (10, 10)
    for name in ("ttft_p50", "tpot_p50", "e2e_p50"):  # percentiles: bootstrap over requests
        assert calls[name].basis == "requests" and min(calls[name].units) > 100
    # 240 requests a side: a p99 is not called either way.
    assert calls["ttft_p99"].call == RUN_MORE and "1,000 requests" in calls["ttft_p99"].note
    assert not any(c.call in (BETTER, WORSE) for c in calls.values())


def test_a_known_20_percent_difference_is_called() -> None:
    calls = {c.metric: c for c in compare_pair(rate=20.0, ttft=0.2, slower=1.2)}
    assert calls["ttft_p50"].call == WORSE
    assert calls["ttft_p50"].low is not None and calls["ttft_p50"].low > 1.05
    assert calls["throughput"].call == SAME  # same offered rate, both sustained


def test_unsustainable_latency_is_not_compared() -> None:
    recs = _open_loop(20.0, 12.0, 0.1, seed=3)
    a = LevelData(
        recs,
        {
            **aggregate(recs, window=Window("auto"), target_rate=20.0),
            "sustainability": {"judged": True, "sustainable": False},
        },
    )
    calls = {c.metric: c for c in compare([a], [_level(recs, 20.0)])}
    assert calls["ttft_p50"].call == NOT_COMPARED
    assert calls["throughput"].call == SAME


def _marked(lv: LevelData, check: str, detail: str) -> LevelData:
    bad = {"check": check, "ok": False, "invalidates": ["itl"], "detail": detail}
    return LevelData(lv.records, {**lv.agg, "validity": [*lv.agg.get("validity", []), bad]})


def test_a_metric_either_side_marks_invalid_is_not_compared_and_both_are_named() -> None:
    recs = _open_loop(20.0, 12.0, 0.1, seed=3)
    a, b = _level(recs, 20.0), _level(recs, 20.0)
    bad_b = _marked(b, "tokens_per_chunk", "2 tokens a chunk")
    itl = {c.metric: c for c in compare([a], [bad_b])}["itl_p99"]
    assert itl.call == NOT_COMPARED and itl.note == (
        "B marks it invalid (tokens_per_chunk: 2 tokens a chunk)"
    )
    # A busy box marked A too: the note names both, so B's own fault is never hidden.
    both = {c.metric: c for c in compare([_marked(a, "client_limited", "lag")], [bad_b])}
    assert both["itl_p99"].call == NOT_COMPARED and both["itl_p99"].note == (
        "A marks it invalid (client_limited: lag); "
        "B marks it invalid (tokens_per_chunk: 2 tokens a chunk)"
    )


def test_an_unsustainable_run_is_left_out_of_a_repeat() -> None:
    a = [_level(_open_loop(20.0, 6.0, 0.1, seed=s), 20.0) for s in (1, 2, 3)]
    b = [_level(_open_loop(20.0, 6.0, 0.13, seed=s), 20.0) for s in (4, 5, 6)]
    bad = b[2]
    b[2] = LevelData(
        bad.records, {**bad.agg, "sustainability": {"judged": True, "sustainable": False}}
    )
    ttft = {c.metric: c for c in compare(a, b)}["ttft_p50"]
    assert ttft.units == (3, 2) and ttft.call == WORSE and "left out" in ttft.note
    b[1] = LevelData(b[1].records, b[2].agg)
    assert {c.metric: c for c in compare(a, b)}["ttft_p50"].call == NOT_COMPARED


def test_runs_are_the_units_with_repeats() -> None:
    a = [_level(_open_loop(20.0, 6.0, 0.1, seed=s), 20.0) for s in (1, 2, 3)]
    b = [_level(_open_loop(20.0, 6.0, 0.13, seed=s), 20.0) for s in (4, 5, 6)]
    calls = {c.metric: c for c in compare(a, b)}
    assert calls["ttft_p50"].basis == "runs" and calls["ttft_p50"].units == (3, 3)
    assert calls["ttft_p50"].call == WORSE


def test_fluid_slices_smooth_a_closed_loop_that_finishes_together() -> None:
    # Four requests at a time, each 0.5 s, all finishing together: counted by finish,
    # 1 s slices would alternate; spread over service time, every slice sees 8 req/s.
    recs = []
    for k in range(40):
        for j in range(4):
            t = 100.0 + 0.5 * k
            recs.append(
                RequestRecord(
                    f"{k}-{j}",
                    scheduled=t,
                    sent=t,
                    chunk_times=[t + 0.1],
                    chunk_tokens=[1],
                    end=t + 0.5,
                    ok=True,
                    completion_tokens=1,
                )
            )
    lv = LevelData(recs, {"window": {"start": 100.0, "end": 119.5}})
    vals = slice_values(lv, metric_named("throughput"))
    assert vals.size == 10 and np.allclose(vals, 8.0, rtol=0.03)


def test_goodput_slices_count_only_requests_within_the_slo() -> None:
    recs = _open_loop(10.0, 10.0, 0.1, seed=5, jitter=0.0)
    lv = LevelData(recs, {"window": {"start": 1000.0, "end": 1009.9}})
    good = slice_values(lv, metric_named("goodput"), slo={"ttft_p99": 0.05})
    allp = slice_values(lv, metric_named("throughput"))
    assert np.all(good == 0.0) and allp.mean() > 9.0


def test_repeat_groups() -> None:
    levels = [
        {"name": "c=1#1", "repeat_of": "c=1"},
        {"name": "c=4#1", "repeat_of": "c=4"},
        {"name": "c=1#2", "repeat_of": "c=1"},
        {"name": "c=4#2", "repeat_of": "c=4"},
        {"name": "r=2"},
    ]
    assert repeat_groups(levels) == {
        "c=1": ["c=1#1", "c=1#2"],
        "c=4": ["c=4#1", "c=4#2"],
        "r=2": ["r=2"],
    }


@given(st.integers(min_value=1, max_value=50))
def test_family_confidence_keeps_the_familywise_false_alarm_at_5_percent(k: int) -> None:
    conf = family_confidence(k)
    # Holm's first step (Bonferroni): k intervals at it miss together at most 5% of the time.
    assert k * (1.0 - conf) == pytest.approx(0.05)
    assert family_confidence(1) == pytest.approx(0.95) and family_confidence(k + 1) > conf
    assert confidence_text(1) == "95%" and "Holm" in confidence_text(2)


def test_a_family_interval_is_wider_and_contains_the_single_one() -> None:
    a = _level(_open_loop(20.0, 8.0, 0.1, seed=1), 20.0)
    b = _level(_open_loop(20.0, 8.0, 0.11, seed=2), 20.0)
    one = {c.metric: c for c in compare([a], [b])}
    four = {c.metric: c for c in compare([a], [b], confidence=family_confidence(4))}
    for name in ("throughput", "ttft_p50"):
        lo1, hi1, lo4, hi4 = one[name].low, one[name].high, four[name].low, four[name].high
        assert None not in (lo1, hi1, lo4, hi4), name
        assert lo4 < lo1 and hi4 > hi1, name  # type: ignore[operator]
        assert four[name].confidence == pytest.approx(0.9875)


def test_holm_calls_after_a_first_call_what_the_first_step_could_not() -> None:
    """report A B C: B is far off and called at 97.5%; C is called only at Holm's second
    step (95%), and never when every interval stays at 97.5%."""
    from infersight.report.compare.rows import level_calls
    from infersight.report.view import LevelView

    def view(d: LevelData) -> list[LevelView]:
        return [LevelView("r=20", list(d.records), d.agg, (0.0, 1.0))]

    a = _level(_open_loop(20.0, 12.0, 0.1, seed=1), 20.0)
    b = _level(_open_loop(20.0, 12.0, 0.13, seed=2), 20.0)
    # A C that the second step calls and the first does not, found in a fixed grid of runs.
    for slower in np.arange(1.05, 1.12, 0.002):
        c = _level(_open_loop(20.0, 12.0, 0.1 * slower, seed=3), 20.0)
        strict = {x.metric: x for x in compare([a], [c], confidence=family_confidence(2))}
        loose = {x.metric: x for x in compare([a], [c])}
        if strict["ttft_p50"].call == RUN_MORE and loose["ttft_p50"].call == WORSE:
            break
    else:
        pytest.fail("no C between the two steps in the grid")
    calls = level_calls([view(a), view(b), view(c)])
    assert calls[0]["TTFT p50"].call == WORSE and calls[0]["TTFT p50"].confidence == 0.975
    assert calls[1]["TTFT p50"].call == WORSE
    assert calls[1]["TTFT p50"].confidence == pytest.approx(0.95)
    # Without B's call there is no second step: C stays inconclusive at 97.5%.
    alone = level_calls([view(a), view(a), view(c)])
    assert alone[1]["TTFT p50"].call == RUN_MORE
