"""Adaptive concurrency against a server that answers 429 above 6 requests in flight."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import aiohttp

from infersight.batch import BatchConfig, read_output, run_batch_async
from infersight_testkit.fake.openai import FakeConfig, FakeOpenAI


async def test_settles_near_the_server_limit_without_a_429_storm(
    tmp_path: Path, write_input: Callable[..., list[str]]
) -> None:
    ids = write_input(tmp_path / "in.jsonl", 300)
    # 8 tokens at 10 ms + 40 ms: ~0.11 s per request; 429 + Retry-After: 1 above 6.
    cfg = FakeConfig(ttft=0.04, itl=0.01, tokens=8, max_concurrency=6)
    with FakeOpenAI.subprocess(cfg) as srv:
        summary = await run_batch_async(
            BatchConfig(
                input=tmp_path / "in.jsonl", output=tmp_path / "out.jsonl", url=srv.base_url
            )
        )
        async with aiohttp.ClientSession() as s, s.get(srv.base_url + "/_fake/stats") as r:
            stats = await r.json()
    assert summary.stopped == "completed" and summary.done == 300 and summary.failed == 0
    assert set(read_output(tmp_path / "out.jsonl")) == set(ids)
    rejected = stats["statuses"].get("429", 0)
    assert stats["requests"] == summary.attempts
    assert rejected == summary.errors_by_kind.get("RateLimited", 0)
    assert rejected / stats["requests"] < 0.05, stats
    assert summary.concurrency_settled is not None and 5 <= summary.concurrency_settled <= 7
    assert stats["max_in_flight"] <= 8 + 1  # never a flood above the limit
    # The log explains the back-off with the error kind and the server's Retry-After.
    assert any(
        "RateLimited" in d["reason"] and "Retry-After" in d["reason"] for d in summary.decisions
    )
