"""End to end, bench -> diagnose -> RunResult, against fake servers whose limits are
known (infersight.testing's server in its own process): the number in each fix agrees
with the server and with the run's own levels (docs/design.md section 5)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest

from infersight.bench import BenchConfig
from infersight.core.records import RunResult
from infersight.diagnose.fixes import raises_slots
from infersight.entrypoints.bench import bench_and_diagnose
from infersight.testing.fake_openai import FakeConfig, FakeOpenAI

pytestmark = pytest.mark.timeout(150)


def _server(**kw: Any) -> Iterator[Any]:
    # 0.2 s to the first token, then 4 more 10 ms apart: about 0.24 s a request
    cfg = FakeConfig(ttft=0.2, itl=0.01, tokens=5, **kw)
    with FakeOpenAI.subprocess(cfg) as srv:
        yield srv


def _bench(url: str, scrape: bool = True, **kw: Any) -> RunResult:
    cfg = BenchConfig(url=url, scrape=[url + "/metrics"] if scrape else [], no_scrape=not scrape,
                      sample_interval=0.25, max_tokens=5, input_tokens="fixed:16",
                      progress=False, diagnose=True, **kw)
    result = bench_and_diagnose(cfg)
    assert result.capacity_curve is not None and result.recommendation is not None, result.notes
    return result


def _at(result: RunResult, level: str) -> set[str]:
    """The level's verdicts, less those a shared, busy box may add to any run."""
    noise = {"client_limited", "host_starved"}
    return {v.id for v in result.diagnosis if v.level == level} - noise


def test_four_slots_offered_33_per_second_get_8_to_12_not_the_queue() -> None:
    for srv in _server(slots=4, metrics_dialect="vllm"):
        result = _bench(srv.base_url, rate=[33.0], duration=3.0)
    v = next(v for v in result.diagnosis if v.id == "slot_bound")
    assert v.evidence_value("waiting") > 15  # the open loop's queue: not a demand
    assert 8 <= v.evidence_value("recommended_slots") <= 12
    rec = result.recommendation
    assert rec is not None and (rec.knob, rec.direction, rec.current) == ("slots", "up", 4)
    assert 8 <= (rec.target or 0) <= 12 and rec.text.endswith(f"raise --max-num-seqs 4 \u2192 {rec.target}.")


def test_a_compute_knee_of_four_with_sixteen_slots_is_compute_bound_at_c16() -> None:
    for srv in _server(slots=16, compute_knee=4, metrics_dialect="vllm"):
        result = _bench(srv.base_url, concurrency=[1, 4, 16], duration=2.5, engine_slots=16)
    curve = result.capacity_curve
    assert curve is not None and curve.plateau == "compute" and curve.knee_level == "c=4"
    assert _at(result, "c=16") == {"compute_bound"}, [(v.id, v.summary) for v in result.diagnosis]
    assert not any(raises_slots(f) for v in result.diagnosis for f in v.fixes)
    rec = result.recommendation
    assert rec is not None and rec.verdict == "compute_bound" and rec.direction == "down"
    # 2 x the knee measured (4 on a quiet box; a busy client keeps fewer in flight), and
    # one replica per knee's worth of the 16 clients
    knee = round(curve.knee or 0)
    assert 3 <= knee <= 4 and rec.target == 2 * knee <= 8
    assert rec.replicas == -(-16 // knee)


def test_four_slots_closed_loop_is_an_admission_limit_from_the_curve() -> None:
    for srv in _server(slots=4, metrics_dialect="vllm"):
        result = _bench(srv.base_url, concurrency=[1, 4, 16], duration=2.5)
    curve = result.capacity_curve
    assert curve is not None and curve.plateau == "admission" and round(curve.plateau_at or 0) == 4
    assert "slot_bound" in _at(result, "c=16") and "capacity" not in _at(result, "c=16")
    rec = result.recommendation
    assert rec is not None and (rec.knob, rec.direction, rec.current, rec.target) == (
        "slots", "up", 4, 16)


def test_random_503s_with_flat_latency_are_error_driven_not_overloaded() -> None:
    rng = random.Random(7)
    script = ["503" if rng.random() < 0.1 else "ok" for _ in range(60)]
    for srv in _server(script=script):
        result = _bench(srv.base_url, scrape=False, rate=[10.0], duration=3.0)
    ids = [v.id for v in result.diagnosis]
    assert "error_driven" in ids and "overloaded" not in ids, [v.summary for v in result.diagnosis]
    assert result.aggregates["r=10"]["sustainability"]["sustainable"] is True
    assert result.recommendation is not None and result.recommendation.verdict == "error_driven"
