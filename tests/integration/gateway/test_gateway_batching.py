"""Dynamic batching: N concurrent embedding requests in fewer upstream calls."""

from __future__ import annotations

import asyncio

import orjson
from gateway_stack import StackFactory

from infersight_testkit.fake.openai import FakeConfig


async def test_embeddings_are_batched_and_each_caller_gets_its_own(
    make_stack: StackFactory,
) -> None:
    n = 24
    async with make_stack(
        [FakeConfig(embed_base=0.05, embedding_dim=8)],
        batch={"max_batch_size": 64, "max_wait_ms": 100},
    ) as s:
        inputs: list[str | list[str]] = [f"text number {i}" for i in range(n - 2)]
        inputs += [["multi a", "multi b"], "x"]
        results = await asyncio.gather(
            *(s.post("/v1/embeddings", {"model": "fake", "input": inp}) for inp in inputs)
        )
        fake = s.fakes[0]
        calls = fake.stats["embedding_batches"]
        assert len(calls) <= n // 3, calls
        assert sum(calls) == n + 1  # every input went upstream exactly once
        for inp, (status, headers, raw) in zip(inputs, results, strict=True):
            assert status == 200, raw
            doc = orjson.loads(raw)
            items = inp if isinstance(inp, list) else [inp]
            assert [d["index"] for d in doc["data"]] == list(range(len(items)))
            for d, item in zip(doc["data"], items, strict=True):
                assert d["embedding"] == fake.vector(item)
            assert doc["usage"]["prompt_tokens"] >= 1
            assert float(headers["X-Queue-Delay"]) >= 0.0
        assert await s.metric("infersight_gateway_batch_size_count") == len(calls)
        assert await s.metric(
            "infersight_gateway_upstream_calls_total", endpoint="embeddings"
        ) == len(calls)


async def test_completions_prompt_lists_are_batched(make_stack: StackFactory) -> None:
    async with make_stack(
        [FakeConfig(tokens=2, ttft=0.02)],
        batch={
            "endpoints": ["embeddings", "completions"],
            "max_batch_size": 16,
            "max_wait_ms": 100,
        },
    ) as s:
        prompts: list[str | list[str]] = [f"p{i}" for i in range(6)] + [["q1", "q2"]]
        res = await asyncio.gather(
            *(
                s.post("/v1/completions", {"model": "fake", "prompt": p, "max_tokens": 2})
                for p in prompts
            )
        )
        assert s.fakes[0].stats["requests"] < len(prompts)
        for p, (status, _, raw) in zip(prompts, res, strict=True):
            assert status == 200, raw
            doc = orjson.loads(raw)
            n = len(p) if isinstance(p, list) else 1
            assert [c["index"] for c in doc["choices"]] == list(range(n))
            assert all(c["text"] == "tok tok " for c in doc["choices"])
            assert doc["usage"]["completion_tokens"] == 2 * n


async def test_a_rejected_batch_is_retried_per_caller(make_stack: StackFactory) -> None:
    # The merged call gets a 400: each caller is then tried alone and gets its own answer.
    async with make_stack(
        [FakeConfig(tokens=1, script=[400])],
        batch={"endpoints": ["completions"], "max_batch_size": 8, "max_wait_ms": 30},
    ) as s:
        res = await asyncio.gather(
            *(s.post("/v1/completions", {"model": "fake", "prompt": f"p{i}"}) for i in range(3))
        )
        assert [r[0] for r in res] == [200, 200, 200]
        assert s.fakes[0].stats["requests"] == 4  # 1 merged + 3 alone
