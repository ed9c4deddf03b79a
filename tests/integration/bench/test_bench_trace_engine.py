"""Conversations on the real embedded engine (llama.cpp): each turn carries the
history and the answers received, llama.cpp's prompt cache serves that history
(seen from each answer's cached_tokens and from its own counters), and TTFT is
reported per turn. Short: 2 conversations of 2 turns, small prompts."""

from __future__ import annotations

from typing import Any

import pytest

from infersight.bench import BenchConfig, run

pytestmark = [pytest.mark.engine, pytest.mark.timeout(300)]


def test_conversations_reuse_their_history_on_the_engine(engine: Any) -> None:
    cfg = BenchConfig.build(
        url=engine.base_url,
        sessions=2,
        concurrency=[2],
        turns="fixed:2",
        input_tokens="fixed:12",
        max_tokens=8,
        ignore_eos=True,
        progress=False,
        diagnose=False,
        sample_interval=0.25,
    )
    result = run(cfg)
    recs = result.records
    assert len(recs) == 4 and all(r.ok for r in recs), [r.error_message for r in recs]
    by_conv: dict[str, dict[str, Any]] = {}
    for r in recs:
        by_conv.setdefault(r.labels["session"], {})[r.labels["turn"]] = r
    for turns in by_conv.values():
        one, two = turns["1"], turns["2"]
        assert one.prompt_tokens and two.prompt_tokens and one.completion_tokens == 8
        # the history, the answer received and 12 new tokens, each message in the template
        assert two.prompt_tokens >= one.prompt_tokens + 8 + 12
        # llama.cpp's prompt cache served the history the turn repeats
        assert two.cached_tokens is not None and two.cached_tokens >= one.prompt_tokens - 2
    agg = result.aggregates["c=2"]
    assert set(agg["replay"]["turns"]) == {"1", "2"}
    assert (
        agg["replay"]["turns"]["2"]["prompt_tokens_mean"]
        > agg["replay"]["turns"]["1"]["prompt_tokens_mean"]
    )
    assert agg["prefix_cache"]["client"]["hit_rate"] > 0.3
    engine_side = agg["prefix_cache"].get("engine")
    assert engine_side is not None and engine_side["hit_rate"] > 0  # llamacpp counters
    assert result.config["workload"]["template_tokens"]["measured"] is True
