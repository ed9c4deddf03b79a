"""Failover first, backoff second (issue 31; docs/design.md section 4).

A failure that allows a retry goes to another upstream of the model at once, while
one is admitting; a retry of the same upstream, with backoff, happens only when no
other is left. Each failover is counted per (from, to) pair and the access log names
the upstreams a request went through (test_gateway_access_log.py).
"""

from __future__ import annotations

import pytest
from gateway_stack import CHAT, StackFactory

from infersight_testkit.fake.openai import FakeConfig

STREAM = {**CHAT, "stream": True}
#: Retries allowed on every upstream: what failover-first must not spend while b is free.
RETRIES = {"max_attempts": 3}


@pytest.mark.parametrize("body", [CHAT, STREAM], ids=["json", "stream"])
@pytest.mark.parametrize("fault", ["503", "429", "reset"])
async def test_a_retryable_failure_moves_to_the_free_upstream_at_once(
    make_stack: StackFactory, body: dict[str, object], fault: str
) -> None:
    async with make_stack(
        [FakeConfig(script=[fault]), FakeConfig(tokens=2)], upstreams=[RETRIES, RETRIES]
    ) as s:
        status, _, raw = await s.post("/v1/chat/completions", body)
        assert status == 200, raw
        # a was tried once, never retried (no backoff): b took the request over.
        assert s.fakes[0].stats["requests"] == 1
        assert s.fakes[1].stats["requests"] == 1
        assert await s.metric("infersight_gateway_retries_total") == 0
        assert (
            await s.metric(
                "infersight_gateway_failover_pairs_total", from_upstream="a", to_upstream="b"
            )
            == 1
        )
        assert await s.metric("infersight_gateway_failovers_total", upstream="a") == 1


async def test_the_only_upstream_is_retried_with_backoff(make_stack: StackFactory) -> None:
    async with make_stack([FakeConfig(script=[503, 503], tokens=2)], upstreams=[RETRIES]) as s:
        status, _, raw = await s.post("/v1/chat/completions", CHAT)
        assert status == 200, raw
        assert s.fakes[0].stats["requests"] == 3
        assert await s.metric("infersight_gateway_retries_total", upstream="a") == 2
        assert await s.metric("infersight_gateway_failover_pairs_total") == 0


async def test_retry_after_holds_its_upstream_while_the_other_is_retried(
    make_stack: StackFactory,
) -> None:
    # a asks for 30 s; b fails once too. b is then the only one left, so it is retried
    # (after a backoff); a is not tried again by this request.
    async with make_stack(
        [
            FakeConfig(script=[{"status": 503, "retry_after": "30"}]),
            FakeConfig(script=[503], tokens=2),
        ],
        upstreams=[RETRIES, RETRIES],
    ) as s:
        status, _, raw = await s.post("/v1/chat/completions", CHAT)
        assert status == 200, raw
        # the upstreams' own records, in order: b's retry came before a's Retry-After
        # (30 s from a's answer) ran out, so the request did not wait for it
        a_free_again = s.fakes[0].stats["arrivals"][0] + 30
        assert s.fakes[1].stats["arrivals"][-1] < a_free_again
        assert s.fakes[0].stats["requests"] == 1
        assert s.fakes[1].stats["requests"] == 2
        assert await s.metric("infersight_gateway_retries_total", upstream="b") == 1


async def test_an_upstream_that_is_not_admitting_leaves_the_retry_to_the_other(
    make_stack: StackFactory,
) -> None:
    # b's circuit is open: a is the only upstream admitting, so a's 503 is retried there.
    async with make_stack(
        [FakeConfig(tokens=2), FakeConfig(script=[503] * 5)],
        upstreams=[RETRIES, {"max_attempts": 1, "breaker_failures": 1, "breaker_cooldown_s": 60}],
    ) as s:
        for _ in range(4):  # b fails the first request it gets (over to a), then opens
            status, _, raw = await s.post("/v1/chat/completions", CHAT)
            assert status == 200, raw
            if await s.metric("infersight_gateway_circuit_state", upstream="b") == 2:
                break
        assert await s.metric("infersight_gateway_circuit_state", upstream="b") == 2
        before = s.fakes[0].stats["requests"]
        s.fakes[0].set_script([503])
        status, _, raw = await s.post("/v1/chat/completions", CHAT)
        assert status == 200, raw
        assert s.fakes[0].stats["requests"] - before == 2  # the 503, then its retry
        assert await s.metric("infersight_gateway_retries_total", upstream="a") == 1
