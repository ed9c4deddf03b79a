"""Deadlines spent in the gateway's own queue do not shrink the adaptive limit
(docs/design.md section 4): the upstream only had the rest of such a deadline, less
than a typical answer takes, so its expiry says nothing about the upstream. Before,
each one was fed to the limiter as congestion and the limit collapsed under deadlines
(``benchmarks/adaptive_controllers.py``)."""

from __future__ import annotations

import asyncio

import pytest
from gateway_stack import CHAT, Stack, StackFactory

from infersight.gateway.breaker import BreakerState
from infersight_testkit.fake.openai import FakeConfig
from support.waiting import until

LIMIT = 4
#: Every answer takes 0.5 s; a request queued behind a full round of them is admitted
#: with about 0.3 s of its 0.8 s deadline left: short of a typical answer, by 0.2 s either
#: way, so the test does not hang on the machine's speed.
ANSWER_S = 0.5
DEADLINE_MS = 800


async def _wait_in_flight(s: Stack, n: int) -> None:
    adm = s.gw.upstreams[0].admission
    await until(lambda: adm.inflight == n, f"{n} requests in flight")


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_deadlines_spent_in_the_queue_leave_the_limit_alone(
    make_stack: StackFactory, stream: bool
) -> None:
    fake = FakeConfig(ttft=ANSWER_S, itl=0.0, tokens=2)
    up = {"limiter": "aimd", "concurrency": LIMIT, "breaker_failures": 2}
    async with make_stack([fake], upstreams=[up]) as s:
        body = {**CHAT, "stream": stream}
        # A full round without deadlines takes every slot and, as it ends, teaches the
        # admission the typical answer time (0.5 s) before the queue is let in.
        blockers = [asyncio.create_task(s.post("/v1/chat/completions", body)) for _ in range(LIMIT)]
        await _wait_in_flight(s, LIMIT)
        dl = {"X-Infersight-Deadline-Ms": str(DEADLINE_MS)}
        late = [asyncio.create_task(s.post("/v1/chat/completions", body, dl)) for _ in range(LIMIT)]
        done = await asyncio.wait_for(asyncio.gather(*blockers, *late), 30.0)
        assert [st for st, _, _ in done[:LIMIT]] == [200] * LIMIT
        assert [st for st, _, _ in done[LIMIT:]] == [504] * LIMIT
        # The deadlines passed in the upstream call (not in the queue, which never
        # reaches the limiter): the case the rule is about.
        expired = await s.metric(
            "infersight_gateway_upstream_errors_total", upstream="a", error="DeadlineExceeded"
        )
        assert expired >= 1
        u = s.gw.upstreams[0]
        # Before the rule: 4 congestion samples, a back-off to 2 and an open circuit.
        assert u.admission.limit >= LIMIT
        assert await s.metric("infersight_gateway_concurrency_limit", upstream="a") >= LIMIT
        assert u.breaker.state is BreakerState.CLOSED
        assert u.health.counts() == (LIMIT, 0)
