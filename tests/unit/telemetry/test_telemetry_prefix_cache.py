"""The prefix cache's counters under one pair of names for every engine that has them:
hits / queries in prompt tokens (llama.cpp counts processed and cached prompt tokens
apart, so its queries are the two added up; SGLang's prompt tokens include the cached)."""

from __future__ import annotations

import pytest

from infersight.telemetry import Normalizer


def _values(engine: str, text: str) -> dict[str, float | None]:
    out = Normalizer(engine, source="http://x/metrics").normalize_text(text, 1.0)
    return {s.name: s.value for s in out}


def test_llamacpp_queries_are_processed_plus_cached() -> None:
    v = _values(
        "llamacpp",
        (
            "# TYPE llamacpp:prompt_tokens_total counter\nllamacpp:prompt_tokens_total 360\n"
            "# TYPE llamacpp:prompt_tokens_cached_total counter\n"
            "llamacpp:prompt_tokens_cached_total 696\n"
        ),
    )
    assert v["engine.prompt_tokens_total"] == 360  # unchanged: what was computed
    assert v["engine.prompt_tokens_cached_total"] == 696
    assert v["engine.prefix_cache_hits_total"] == 696
    assert v["engine.prefix_cache_queries_total"] == 360 + 696


def test_sglang_and_vllm_hits_and_queries() -> None:
    v = _values(
        "sglang",
        (
            "# TYPE sglang:prompt_tokens_total counter\nsglang:prompt_tokens_total 1000\n"
            "# TYPE sglang:cached_tokens_total counter\nsglang:cached_tokens_total 250\n"
        ),
    )
    assert (v["engine.prefix_cache_hits_total"], v["engine.prefix_cache_queries_total"]) == (
        250,
        1000,
    )
    assert v["engine.prompt_tokens_total"] == 1000
    v = _values(
        "vllm",
        (
            "# TYPE vllm:prefix_cache_queries_total counter\nvllm:prefix_cache_queries_total 80\n"
            "# TYPE vllm:prefix_cache_hits_total counter\nvllm:prefix_cache_hits_total 20\n"
        ),
    )
    assert v["engine.prefix_cache_hits_total"] / v[
        "engine.prefix_cache_queries_total"
    ] == pytest.approx(0.25)  # type: ignore[operator]
