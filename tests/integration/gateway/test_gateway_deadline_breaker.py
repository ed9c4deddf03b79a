"""A missed deadline or first-byte limit opens an upstream's circuit only when the
upstream is broken, not when it is busy (docs/design.md section 4): one that finished
other answers while the limit ran is overloaded, and opening its circuit turns the
overload into an outage (``benchmarks/adaptive_controllers.py``: goodput fell to a third
of capacity at 1.2x load). A hang still opens it; a stream its own deadline ends is
never the upstream's fault."""

from __future__ import annotations

import asyncio
import logging

import orjson
import pytest
from gateway_stack import CHAT, StackFactory
from test_gateway_faults import STREAM, sse_events

from infersight.gateway.breaker import BreakerState
from infersight_testkit.fake.openai import FakeConfig

#: One slot, 0.3 s an answer: 8 requests sent at once end at 0.3, 0.6, ... 2.4 s, so
#: with a 1.5 s limit the first ones are answered and the rest miss at the upstream
#: (a slow machine moves the split, never the order).
N, LIMIT_S = 8, 1.5

#: The two limits a busy upstream can miss: the request's deadline (a header here) and
#: the upstream's first-byte limit (its config); what each miss is counted as.
LIMITS = {
    "deadline": ({}, {"X-Infersight-Deadline-Ms": str(int(LIMIT_S * 1000))}, "DeadlineExceeded"),
    "first_byte": (
        {"ttft_timeout_s": LIMIT_S, "first_byte_timeout_s": LIMIT_S},
        {},
        "FirstTokenTimeout",
    ),
}


@pytest.mark.parametrize("limit", sorted(LIMITS))
@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_limits_missed_by_a_busy_upstream_leave_its_circuit_closed(
    make_stack: StackFactory, stream: bool, limit: str
) -> None:
    config, headers, error = LIMITS[limit]
    fake = FakeConfig(ttft=0.3, itl=0.0, tokens=1, slots=1)
    up = {"concurrency": N, "breaker_failures": 2, **config}
    async with make_stack([fake], upstreams=[up]) as s:
        body = {**CHAT, "stream": stream}
        sent = [
            asyncio.create_task(s.post("/v1/chat/completions", body, headers)) for _ in range(N)
        ]
        statuses = sorted(st for st, _, _ in await asyncio.wait_for(asyncio.gather(*sent), 30))
        missed = N - statuses.count(200)
        assert statuses.count(200) >= 1 and missed >= 2, statuses
        assert missed == await s.metric(
            "infersight_gateway_upstream_errors_total", upstream="a", error=error
        )
        # Before: every miss a failure, and two in a row opened the circuit.
        assert s.gw.upstreams[0].breaker.state is BreakerState.CLOSED
        status, _, raw = await s.post("/v1/chat/completions", body)
        assert status == 200, raw


@pytest.mark.parametrize("limit", sorted(LIMITS))
async def test_limits_missed_by_a_hanging_upstream_open_its_circuit(
    make_stack: StackFactory, limit: str
) -> None:
    config, headers, _ = LIMITS[limit]
    short = {k: 0.3 for k in config}  # each limit at 0.3 s: the hang answers nothing
    fake = FakeConfig(script=["hang", "hang"])
    async with make_stack([fake], upstreams=[{"breaker_failures": 2, **short}]) as s:
        for _ in range(2):
            status, _, _ = await s.post("/v1/chat/completions", CHAT, {k: "300" for k in headers})
            assert status == 504
        assert s.gw.upstreams[0].breaker.state is BreakerState.OPEN
        status, _, raw = await s.post("/v1/chat/completions", CHAT)
        assert status == 503 and orjson.loads(raw)["error"]["code"] == "no_upstream_available"


async def test_a_stream_its_deadline_ends_is_no_upstream_failure(
    make_stack: StackFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="infersight.gateway.access")
    fake = FakeConfig(tokens=200, itl=0.02)  # 4 s of answer; the deadline ends it at 0.5 s
    async with make_stack([fake], upstreams=[{"breaker_failures": 1}]) as s:
        status, _, raw = await s.post(
            "/v1/chat/completions", STREAM, {"X-Infersight-Deadline-Ms": "500"}
        )
        events = sse_events(raw)
        assert status == 200 and "error" in events[-1] and "[DONE]" not in events
        assert len(events) > 2  # content came first: the deadline cut an answer
        u = s.gw.upstreams[0]
        # Before: a TruncatedStream, the upstream's failure: the circuit opened at once.
        assert u.breaker.state is BreakerState.CLOSED
        assert u.health.counts() == (0, 1)  # a missed deadline all the same
        status, _, _ = await s.post("/v1/chat/completions", CHAT)
        assert status == 200
    (line,) = [
        orjson.loads(r.getMessage())
        for r in caplog.records
        if r.name == "infersight.gateway.access" and b'"stream":true' in r.getMessage().encode()
    ]
    assert line["error"] == "DeadlineExceeded" and line["truncated"] is True
