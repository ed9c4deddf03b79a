"""Errors move traffic: a replica that fails often gets a smaller share of new requests
before its circuit opens, and every request still succeeds through the other."""

from __future__ import annotations

import asyncio

from gateway_stack import CHAT, Stack, StackFactory

from infersight_testkit.fake.openai import FakeConfig

RETRIES = {"max_attempts": 3, "breaker_failures": 1000}


async def _send(s: Stack, n: int, concurrency: int = 8) -> list[int]:
    """``n`` requests, ``concurrency`` at a time; their statuses."""
    statuses: list[int] = []
    sem = asyncio.Semaphore(concurrency)

    async def one() -> None:
        async with sem:
            statuses.append((await s.post("/v1/chat/completions", CHAT))[0])

    await asyncio.gather(*(one() for _ in range(n)))
    return statuses


async def test_a_failing_replica_loses_its_share_and_nothing_is_lost(
    make_stack: StackFactory,
) -> None:
    async with make_stack(
        [FakeConfig(tokens=2), FakeConfig(tokens=2)], upstreams=[RETRIES, RETRIES]
    ) as s:
        a, b = s.fakes
        assert await _send(s, 100) == [200] * 100
        assert 20 <= a.stats["requests"] <= 80  # healthy: shared
        a.set_error_rate(0.5)
        assert await _send(s, 100) == [200] * 100  # the share moves while it fails
        before = a.stats["requests"]
        assert await _send(s, 200) == [200] * 200
        share = (a.stats["requests"] - before) / 200
        # b never fails, so a only gets the requests routed to it first.
        assert share < 0.2, f"a failing half its requests still got {share:.0%} of new ones"
        assert await s.metric("infersight_gateway_upstream_weight", upstream="a") < 0.5
        assert await s.metric("infersight_gateway_upstream_weight", upstream="b") == 1.0
        # every 503 a gave was taken over by b, and counted once
        met = a.stats["statuses"].get("503", 0)
        assert met > 0 and b.stats["statuses"].get("503", 0) == 0
        assert (
            await s.metric(
                "infersight_gateway_failover_pairs_total", from_upstream="a", to_upstream="b"
            )
            == met
        )
        assert await s.metric("infersight_gateway_circuit_state", upstream="a") == 0
