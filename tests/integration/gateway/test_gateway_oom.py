"""Issue 12, item 6 at the gateway: an upstream out of memory (each engine's real
answer) fails over to the fallback, shrinks the adaptive limit as a 503 does, is
counted in /metrics, and ``max_tokens_cap`` bounds what one request may claim."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from gateway_stack import CHAT, StackFactory

from infersight_testkit.fake.faults import OOM_ANSWERS
from infersight_testkit.fake.openai import FakeConfig


@pytest.mark.parametrize("engine", sorted(OOM_ANSWERS))
async def test_oom_fails_over_and_is_counted(make_stack: StackFactory, engine: str) -> None:
    async with make_stack(
        [FakeConfig(script=[f"oom:{engine}"] * 2), FakeConfig(tokens=2)],
        upstreams=[{"max_attempts": 1}, {}],
    ) as s:
        status, _, raw = await s.post("/v1/chat/completions", CHAT)
        assert status == 200, raw  # vLLM's OOM is a 400 and TGI's a 424: not passed through
        assert (
            await s.metric(
                "infersight_gateway_upstream_errors_total", upstream="a", error="OutOfMemory"
            )
            == 1
        )
        assert (
            await s.metric("infersight_gateway_failovers_total", upstream="a", error="OutOfMemory")
            == 1
        )


async def test_oom_everywhere_is_a_503_with_retry_after(make_stack: StackFactory) -> None:
    async with make_stack([FakeConfig(script=["oom:vllm"] * 3)]) as s:
        status, headers, raw = await s.post("/v1/chat/completions", CHAT)
    err = orjson.loads(raw)["error"]
    assert status == 503 and headers["Retry-After"] == "1"
    assert err["code"] == "out_of_memory" and err["message"].startswith(
        "upstream a ran out of memory (HTTP 400): CUDA out of memory"
    )
    assert "https://" not in err["message"]  # even the server's own text loses its URLs


async def test_oom_shrinks_the_adaptive_limit_like_a_503(make_stack: StackFactory) -> None:
    up: dict[str, Any] = {"limiter": "aimd", "concurrency": 20, "max_attempts": 1}
    async with make_stack([FakeConfig(script=["oom:llamacpp"] * 5, tokens=1)], upstreams=[up]) as s:
        before = s.gw.upstreams[0].admission.limit
        for _ in range(5):
            await s.post("/v1/chat/completions", CHAT)
        after = s.gw.upstreams[0].admission.limit
    assert before == 20 and after < before * 0.9**4 + 1  # x0.9 per OOM, as per 503


async def test_max_tokens_cap_clamps_what_is_sent(make_stack: StackFactory) -> None:
    async with make_stack([FakeConfig(tokens=50)], upstreams=[{"max_tokens_cap": 8}]) as s:
        status, _, raw = await s.post("/v1/chat/completions", {**CHAT, "max_tokens": 500})
        assert status == 200 and orjson.loads(raw)["usage"]["completion_tokens"] == 8
        status, _, raw = await s.post("/v1/chat/completions", CHAT)  # none given: the cap
        assert status == 200 and orjson.loads(raw)["usage"]["completion_tokens"] == 8
        status, _, raw = await s.post("/v1/chat/completions", {**CHAT, "max_tokens": 3})
        assert status == 200 and orjson.loads(raw)["usage"]["completion_tokens"] == 3
