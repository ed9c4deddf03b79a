"""Level planning: fixed lists, --sweep auto, --find-max bisection."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infersight.bench.config import BenchConfig
from infersight.bench.level.order import LevelOrder
from infersight.core.errors import ConfigError


def order(cfg: BenchConfig) -> LevelOrder:
    """The run's order: the load section and the fixed levels."""
    return LevelOrder(cfg.load, cfg.levels())


def agg(throughput: float, met: bool | None = None) -> dict[str, Any]:
    return {
        "request_throughput": throughput,
        "goodput": throughput if met else 0.0,
        "slo": None if met is None else {"met": met, "checks": {}},
    }


def test_fixed_levels_in_order() -> None:
    p = order(BenchConfig(concurrency=[1, 4, 16]))
    names = []
    while (lv := p.next()) is not None:
        names.append(lv.name)
        p.record(lv, agg(1.0))
    assert names == ["c=1", "c=4", "c=16"] and p.summary() is None


def test_repeat_runs_every_level_again_interleaved() -> None:
    p = order(BenchConfig(concurrency=[1, 4], repeat=3))
    levels = []
    while (lv := p.next()) is not None:
        levels.append(lv)
        p.record(lv, agg(1.0))
    assert [lv.name for lv in levels] == ["c=1#1", "c=4#1", "c=1#2", "c=4#2", "c=1#3", "c=4#3"]
    assert [lv.repeat_of for lv in levels[:2]] == ["c=1", "c=4"]
    assert levels[3].as_dict() == {"name": "c=4#2", "repeat_of": "c=4", "concurrency": 4}
    rates = BenchConfig(rate=[2.0], repeat=2).levels()
    assert [(lv.name, lv.rate) for lv in rates] == [("r=2#1", 2.0), ("r=2#2", 2.0)]


def test_repeat_needs_fixed_levels() -> None:
    with pytest.raises(ConfigError, match="--repeat runs fixed levels again"):
        BenchConfig.build(sweep="auto", repeat=2)
    with pytest.raises(ConfigError, match="repeat"):
        BenchConfig.build(concurrency=[1], repeat=0)


def test_sweep_auto_spans_baseline_to_saturation() -> None:
    p = order(BenchConfig(sweep="auto", sweep_levels=3))
    first = p.next()
    assert first is not None and first.concurrency == 1
    p.record(first, agg(2.0))
    second = p.next()
    assert second is not None and second.rate == math.inf
    p.record(second, agg(10.0))
    rates = []
    while (lv := p.next()) is not None:
        assert lv.rate is not None
        rates.append(lv.rate)
        p.record(lv, agg(lv.rate))
    assert rates == [4.0, 6.0, 8.0]


def test_find_max_bisects_to_the_highest_rate_meeting_the_slo() -> None:
    capacity, true_max = 20.0, 7.3  # the SLO holds up to 7.3 req/s
    p = order(BenchConfig(find_max=True, slo="ttft_p99<1s", find_max_steps=6))
    lv = p.next()
    assert lv is not None and lv.name == "throughput"
    p.record(lv, agg(capacity, met=False))
    tried = []
    while (lv := p.next()) is not None:
        assert lv.rate is not None
        tried.append(lv.rate)
        p.record(lv, agg(lv.rate, met=lv.rate <= true_max))
    assert len(tried) == 6
    s = p.summary()
    assert s is not None
    assert s["capacity"] == capacity and len(s["curve"]) == 7
    assert s["max_rate"] <= true_max and true_max - s["max_rate"] < capacity / 2**6 * 2


def test_find_max_when_even_saturation_meets_the_slo() -> None:
    p = order(BenchConfig(find_max=True, slo="ttft_p99<10s"))
    lv = p.next()
    assert lv is not None
    p.record(lv, agg(12.0, met=True))
    assert p.next() is None
    s = p.summary()
    assert s is not None and s["max_rate"] == 12.0


def _sus(sustainable: bool) -> dict[str, Any]:
    return {"judged": True, "sustainable": sustainable}


def test_find_max_fails_an_unsustainable_level_whatever_its_percentiles() -> None:
    # Every SLO check passes, but rates above 7 cannot be sustained: the answer stays
    # below 7 (a short level's percentiles look fine while its queue grows).
    p = order(BenchConfig(find_max=True, slo="ttft_p99<1s", find_max_steps=5))
    lv = p.next()
    assert lv is not None
    p.record(lv, agg(20.0, met=False))
    while (lv := p.next()) is not None:
        assert lv.rate is not None
        p.record(lv, {**agg(lv.rate, met=True), "sustainability": _sus(lv.rate <= 7.0)})
    s = p.summary()
    assert s is not None and s["max_rate"] is not None
    assert s["max_rate"] <= 7.0
    failed = [c for c in s["curve"][1:] if not c["passed"]]
    assert failed and all(c["slo_met"] and c["sustainable"] is False for c in failed)


def test_sweep_stops_after_an_unsustainable_rate() -> None:
    p = order(BenchConfig(sweep="auto", sweep_levels=4))
    for throughput in (2.0, 12.0):
        lv = p.next()
        assert lv is not None
        p.record(lv, agg(throughput))
    lv = p.next()
    assert lv is not None and lv.rate == 4.0
    p.record(lv, {**agg(4.0), "sustainability": _sus(True)})
    lv = p.next()
    assert lv is not None and lv.rate == 6.0
    p.record(lv, {**agg(5.0), "sustainability": _sus(False)})
    assert p.next() is None  # 8 and 10 req/s would only queue longer


def test_find_max_fails_a_level_that_answers_with_errors() -> None:
    """Fast errors are answers (the level is sustainable), but not a rate that meets the
    SLO: its percentiles cover only the requests that succeeded."""
    from infersight.bench.level.order import level_passed

    good = {
        "slo": {"met": True},
        "sustainability": {"judged": True, "sustainable": True},
        "success_rate": 0.995,
    }
    assert level_passed(good)
    assert not level_passed({**good, "success_rate": 0.9})


def _closed(curve: list[float], slots: int | None = None) -> list[str]:
    """The levels --sweep closed runs against a server whose throughput at the k-th
    level is curve[k] (and whose slots are ``slots``, where known)."""
    cfg = BenchConfig(sweep="closed")
    p = LevelOrder(cfg.load, cfg.levels(), slots)
    names = []
    while (lv := p.next()) is not None:
        assert lv.concurrency == 2 ** len(names) and lv.rate is None
        p.record(lv, agg(curve[len(names)]))
        names.append(lv.name)
    return names


def test_sweep_closed_doubles_until_throughput_stopped_growing_twice() -> None:
    # slot-bound at 4: growth stops at c=8 and at c=16; leaving either out leaves one
    assert _closed([1.0, 1.9, 3.6, 3.7, 3.6, 9.0]) == ["c=1", "c=2", "c=4", "c=8", "c=16"]
    # a noisy level below the best and one above it by less than 10% are both flat
    assert _closed([1.0, 2.0, 1.5, 2.1, 9.0, 9.0]) == ["c=1", "c=2", "c=4", "c=8"]
    # once growth beats the best, one flat level is not the plateau
    assert _closed([1.0, 1.05, 2.0, 2.05, 2.1, 9.0]) == ["c=1", "c=2", "c=4", "c=8", "c=16"]
    # a server that never stops growing: bounded
    assert _closed([2.0**k for k in range(12)]) == [f"c={2**k}" for k in range(6)]


def test_sweep_closed_fills_the_engines_slots_before_it_calls_a_plateau() -> None:
    # the embedded engine on 2 cores: flat from 2 to 4 clients, then 39% more at 8
    curve = [1.54, 1.68, 1.69, 2.35, 2.2, 2.1]
    assert _closed(curve) == ["c=1", "c=2", "c=4"]
    assert _closed(curve, slots=8) == ["c=1", "c=2", "c=4", "c=8", "c=16", "c=32"]
    # slots already filled where the plateau shows: the sweep ends as before
    assert _closed([1.0, 1.9, 3.6, 3.7, 3.6, 9.0], slots=4) == [
        "c=1",
        "c=2",
        "c=4",
        "c=8",
        "c=16",
    ]


@given(
    st.lists(st.floats(0.0, 100.0), min_size=8, max_size=8),
    st.none() | st.integers(1, 64),
)
def test_sweep_closed_ends_on_two_flat_levels_or_the_cap(
    curve: list[float], slots: int | None
) -> None:
    names = _closed(curve, slots)
    thr = curve[: len(names)]
    flat = [thr[i] < max(thr[:i]) * 1.1 for i in range(1, len(thr))]
    top = 2 ** (len(names) - 1)
    assert len(names) == 6 or (flat[-2:] == [True, True] and (slots is None or top >= slots))
    # no earlier plateau once the clients filled the slots (level i + 2 ran 2**(i + 2))
    filled = [slots is None or 2 ** (i + 2) >= slots for i in range(len(flat))]
    assert not any(flat[i] and flat[i + 1] and filled[i] for i in range(len(flat) - 2))
