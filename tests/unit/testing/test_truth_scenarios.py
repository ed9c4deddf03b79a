"""The truth scenarios' table: each scenario's stated truth follows from its server."""

from __future__ import annotations

from pathlib import Path

import pytest

from infersight.bench import BenchConfig
from infersight_testkit.truth_scenarios import (
    LIMITERS,
    SCENARIOS,
    Scenario,
    bursty_trace_rows,
    scenario,
    write_trace,
)


def test_names_are_unique_and_limiters_known() -> None:
    names = [s.name for s in SCENARIOS]
    assert len(names) == len(set(names))
    for s in SCENARIOS:
        assert s.limiter in LIMITERS
        assert set(s.level_limiters.values()) <= set(LIMITERS)


@pytest.mark.parametrize("sc", SCENARIOS, ids=lambda s: s.name)
def test_every_load_is_a_valid_bench_config(sc: Scenario, tmp_path: Path) -> None:
    load = sc.bench_load(quick=True)
    if sc.trace:
        load["trace"] = str(write_trace(sc, tmp_path))
    BenchConfig(url="http://127.0.0.1:1", **load)


def test_capacities_follow_from_slots_kv_and_the_knee() -> None:
    # 16 slots, knee 4, 0.046 + 63 x 0.003 s alone: 4 / 0.235 s
    assert scenario("open_compute").truth()["capacity_rps"] == pytest.approx(17.02, abs=0.01)
    kv = scenario("kv_bound").truth()
    assert kv["kv_fit_requests"] == 4 and kv["capacity_rps"] == pytest.approx(4 / 0.205)
    assert scenario("slots_2").truth()["capacity_rps"] == pytest.approx(2 / 0.205)
    assert scenario("slots_8").truth()["capacity_rps"] == pytest.approx(6 / 0.205)
    mixed = scenario("mixed_prompts").truth()
    assert mixed["mean_prompt_tokens"] == 520 and mixed["service_s"] == pytest.approx(0.257)
    assert scenario("errors").truth()["error_rate"] == 0.1
    assert scenario("engine_parallel_4").truth()["slots"] == 4
    with pytest.raises(KeyError, match="open_compute"):
        scenario("nope")


def test_the_bursty_trace_has_bursts() -> None:
    rows = bursty_trace_rows(6.0)
    starts = [t for t, _, _ in rows]
    assert starts == sorted(starts)
    assert sum(1 for t in starts if t < 0.2) == 16  # a burst of 16 within 0.15 s
