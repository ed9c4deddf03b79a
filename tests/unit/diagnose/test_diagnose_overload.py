"""The overloaded verdict (docs/design.md section 5) on simulated levels with a known truth."""

from __future__ import annotations

import pytest

from infersight.core.records import RunResult
from infersight.diagnose import diagnose
from infersight.stats.aggregate import Window, aggregate
from support.queue_sim import simulate


def _run(rate: float) -> RunResult:
    sim = simulate(slots=4, service=0.24, rate=rate, duration=10)
    for r in sim.records:
        r.labels["level"] = "r"
    agg = aggregate(sim.records, window=Window("auto"), target_rate=rate)
    return RunResult(
        records=sim.records, aggregates={"r": agg}, config={"levels": [{"name": "r", "rate": rate}]}
    )


def test_an_unsustainable_level_is_overloaded_with_its_capacity() -> None:
    vs = diagnose(_run(33.0))
    ids = [v.id for v in vs]
    assert "overloaded" in ids and "healthy" not in ids
    v = next(v for v in vs if v.id == "overloaded")
    assert v.level == "r"
    assert v.evidence_value("offered rate") == pytest.approx(33.0, rel=0.05)
    assert v.evidence_value("achieved rate (capacity estimate)") == pytest.approx(16.7, rel=0.1)
    assert v.evidence_value("queue growth (in flight)") > 10
    assert any("replicas" in f for f in v.fixes)


def test_a_sustainable_level_is_not_overloaded() -> None:
    assert "overloaded" not in [v.id for v in diagnose(_run(8.0))]
