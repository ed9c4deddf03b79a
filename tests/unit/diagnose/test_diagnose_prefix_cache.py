"""prefix_cache_miss: a workload that shares prefixes and a cache that does not hit;
the hit rate read from the engine's counters (vLLM's names, normalised) or from each
answer's cached_tokens; the cause and the fix named for the engine."""

from __future__ import annotations

from typing import Any

import pytest
from diag_fixtures import ids, make_run, one

from infersight.core.records import RunResult, Sample
from infersight.diagnose import diagnose
from infersight.stats.aggregate import aggregate
from infersight.stats.prefix_cache import add_engine_cache, engine_cache


def _run(
    *,
    shared: float | None,
    hits_per_s: float | None,
    sources: int = 1,
    cached: int | None = None,
    engine: str = "vllm",
    **kw: Any,
) -> RunResult:
    """A steady vLLM-shaped run whose prompts repeat ``shared`` of their tokens; the
    engine counts 1000 prompt tokens a second per source, ``hits_per_s`` of them hits."""
    result = make_run(**kw)
    for r in result.records:
        r.cached_tokens = cached
    for s in range(sources):
        src = {"engine": "vllm", "source": f"http://10.0.0.{5 + s}:8000/metrics"}
        for i in range(31):
            t = 1000.0 + i
            result.samples.append(Sample(t, "engine.prefix_cache_queries_total", 1000.0 * i, src))
            if hits_per_s is not None:
                result.samples.append(
                    Sample(t, "engine.prefix_cache_hits_total", hits_per_s * i, src)
                )
    name = result.config["levels"][0]["name"]
    result.aggregates[name] = aggregate([r for r in result.records], target_concurrency=64)
    if shared is not None:
        result.aggregates[name]["prefix_sharing"] = {
            "intended": shared,
            "sent": shared,
            "sent_basis": "test",
        }
    result.config["engine"]["engine"] = engine
    add_engine_cache(result)
    return result


def test_shared_prefixes_and_a_cold_cache_name_the_cache_and_its_setting() -> None:
    vs = diagnose(_run(shared=0.8, hits_per_s=0.0))
    v = one(vs, "prefix_cache_miss")
    assert "80% of the prompt tokens repeat an earlier request's prefix" in v.summary
    assert "vLLM's automatic prefix cache served 0%" in v.summary
    assert "the cache looks off" in v.summary
    assert v.evidence_value("prefix_cache_hit_rate") == 0.0
    assert v.evidence_value("prefix_shared") == 0.8
    assert "engine.prefix_cache_hits_total" in (v.find("prefix_cache_hit_rate").source or "")
    assert any("--enable-prefix-caching" in f for f in v.fixes)


@pytest.mark.parametrize(("shared", "hits"), [(0.8, 700.0), (0.1, 0.0), (None, 0.0), (0.8, None)])
def test_no_verdict_when_the_cache_hits_nothing_is_shared_or_nothing_is_known(
    shared: float | None, hits: float | None
) -> None:
    result = _run(shared=shared, hits_per_s=hits)
    if hits is None:  # no engine counters at all and no cached_tokens: cannot judge
        result.samples = [s for s in result.samples if "prefix_cache" not in s.name]
        for agg in result.aggregates.values():
            agg["prefix_cache"].pop("engine", None)
    assert "prefix_cache_miss" not in ids(diagnose(result))


def test_replicas_behind_one_router_are_the_cause_named() -> None:
    v = one(diagnose(_run(shared=0.9, hits_per_s=200.0, sources=3)), "prefix_cache_miss")
    assert "3 replicas each start cold" in v.summary
    assert "prefix-aware routing" in v.fixes[0]


def test_a_full_kv_cache_evicts_prefixes() -> None:
    v = one(
        diagnose(_run(shared=0.9, hits_per_s=200.0, kv=0.95, running=64, waiting=0)),
        "prefix_cache_miss",
    )
    assert "full, so cached prefixes are evicted" in v.summary
    assert any("--gpu-memory-utilization" in f for f in v.fixes)


def test_the_answers_cached_tokens_serve_when_the_engine_has_no_counter() -> None:
    result = _run(shared=0.7, hits_per_s=None, cached=50, engine="llamacpp", prompt=1000)
    result.samples = [s for s in result.samples if "prefix_cache" not in s.name]
    for agg in result.aggregates.values():
        agg["prefix_cache"].pop("engine", None)
    v = one(diagnose(result), "prefix_cache_miss")
    assert v.evidence_value("prefix_cache_hit_rate") == pytest.approx(0.05)
    assert "cached_tokens" in v.find("prefix_cache_hit_rate").source  # type: ignore[union-attr]


def test_engine_cache_counts_increases_over_the_level() -> None:
    src = {"engine": "sglang", "source": "s"}
    samples = [
        Sample(float(t), "engine.prefix_cache_queries_total", 100.0 * t, src) for t in range(10)
    ]
    # SGLang's hits counter only appears with the first hit: absent before t=5
    samples += [
        Sample(float(t), "engine.prefix_cache_hits_total", 30.0 * (t - 4), src)
        for t in range(5, 10)
    ]
    got = engine_cache(samples, 2.0, 6.0)
    assert got is not None
    assert got["queries"] == pytest.approx(600.0)  # t=2 -> t=8 (read 2 s after the end)
    assert got["hits"] == pytest.approx(120.0)  # from 0 (born at t=5) to 120 at t=8
    assert engine_cache([Sample(3.0, "engine.prefix_cache_hit_ratio", 0.4, src)], 2.0, 6.0) == {
        "hit_rate": 0.4,
        "sources": 1,
        "source": "engine /metrics (engine.prefix_cache_hit_ratio, mean over the level)",
    }
    assert engine_cache([], 0.0, 1.0) is None
