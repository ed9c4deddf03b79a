"""Failure behaviours, one test each, against fault-injecting fake upstreams."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import orjson
from gateway_stack import CHAT, StackFactory

from infersight_testkit.fake.openai import FakeConfig
from support.ports import closed_port
from support.waiting import until, until_awaited

STREAM = {**CHAT, "stream": True}


@contextmanager
def closed_port_url() -> Iterator[str]:
    """A loopback URL that refuses connections for as long as it is held."""
    with closed_port() as port:
        yield f"http://127.0.0.1:{port}"


def sse_events(raw: bytes) -> list[Any]:
    out: list[Any] = []
    for block in raw.split(b"\n\n"):
        for line in block.split(b"\n"):
            if line.startswith(b"data: "):
                data = line[6:]
                out.append("[DONE]" if data == b"[DONE]" else orjson.loads(data))
    return out


def content(events: list[Any]) -> str:
    text = ""
    for ev in events:
        if isinstance(ev, dict):
            for ch in ev.get("choices") or []:
                text += (ch.get("delta") or {}).get("content") or ""
    return text


async def test_429_retry_after_is_honoured_then_succeeds(make_stack: StackFactory) -> None:
    fake = FakeConfig(script=[{"status": 429, "retry_after": "1"}], tokens=3)
    async with make_stack([fake], upstreams=[{"max_attempts": 2}]) as s:
        status, _, body = await s.post("/v1/chat/completions", CHAT)
        assert status == 200, body
        assert await s.metric("infersight_gateway_retries_total", upstream="a") == 1
        arrivals = s.fakes[0].stats["arrivals"]
        assert len(arrivals) == 2
        # the upstream's own record: the retry came after Retry-After (1 s), not before
        assert arrivals[1] - arrivals[0] >= 0.95, arrivals


async def test_429_retry_after_beyond_deadline_fails_fast(make_stack: StackFactory) -> None:
    fake = FakeConfig(script=[{"status": 429, "retry_after": "30"}])
    async with make_stack([fake], upstreams=[{"max_attempts": 3}]) as s:
        status, headers, body = await s.post(
            "/v1/chat/completions", CHAT, {"X-Infersight-Deadline-Ms": "20000"}
        )
        # no retry and no wait: one attempt, and the upstream's 429 passed on (sleeping
        # toward Retry-After would have run into the 20 s deadline: a 504, not this)
        assert status == 429
        assert headers["Retry-After"] == "30"
        assert orjson.loads(body)["error"]["type"] == "rate_limit_error"
        assert s.fakes[0].stats["requests"] == 1
        assert await s.metric("infersight_gateway_retries_total", upstream="a") == 0
        assert (
            await s.metric("infersight_gateway_upstream_errors_total", error="DeadlineExceeded")
            == 0
        )


async def test_503_storm_fails_over_and_opens_the_circuit(make_stack: StackFactory) -> None:
    storm = FakeConfig(script=[503] * 100)
    async with make_stack(
        [storm, FakeConfig(tokens=2)],
        upstreams=[{"breaker_failures": 3, "breaker_cooldown_s": 60}, {}],
    ) as s:
        for _ in range(10):
            status, headers, _ = await s.post("/v1/chat/completions", CHAT)
            assert status == 200
            assert "X-Queue-Delay" in headers
        # a got at most `breaker_failures` requests before its circuit opened
        assert s.fakes[0].stats["requests"] <= 3 + 1
        assert await s.metric("infersight_gateway_circuit_state", upstream="a") == 2
        assert (
            await s.metric("infersight_gateway_failovers_total", upstream="a", error="Overloaded")
            >= 3
        )


async def test_connection_refused_fails_over(make_stack: StackFactory) -> None:
    with closed_port_url() as dead:
        async with make_stack([dead, FakeConfig(tokens=2)]) as s:
            status, _, body = await s.post("/v1/chat/completions", CHAT)
            assert status == 200, body
            assert (
                await s.metric(
                    "infersight_gateway_failovers_total", upstream="a", error="ConnectError"
                )
                == 1
            )


async def test_reset_before_headers_fails_over_without_a_retry(make_stack: StackFactory) -> None:
    async with make_stack(
        [FakeConfig(script=["reset", "reset"]), FakeConfig(tokens=2)],
        upstreams=[{"max_attempts": 2}, {}],
    ) as s:
        status, _, body = await s.post("/v1/chat/completions", STREAM)
        assert status == 200
        assert sse_events(body)[-1] == "[DONE]"
        assert s.fakes[0].stats["requests"] == 1  # b was free: failover first, no retry on a
        assert s.fakes[1].stats["requests"] == 1
        assert (
            await s.metric("infersight_gateway_failovers_total", upstream="a", error="ResetError")
            == 1
        )


async def test_first_token_never_comes_fails_over_within_ttft(make_stack: StackFactory) -> None:
    async with make_stack(
        [FakeConfig(ttft=30.0), FakeConfig(tokens=4)],
        upstreams=[{"ttft_timeout_s": 0.3}, {"ttft_timeout_s": 5.0}],
    ) as s:
        status, _, body = await s.post("/v1/chat/completions", STREAM)
        events = sse_events(body)
        assert status == 200
        assert content(events) == "tok " * 4 and events[-1] == "[DONE]"
        assert (
            await s.metric(
                "infersight_gateway_failovers_total", upstream="a", error="FirstTokenTimeout"
            )
            == 1
        )
        # the failover's cause is a's first-token limit (above), and a was left while it
        # still held its first token back: the gateway hung up on it, not waited its 30 s
        await until(lambda: s.fakes[0].stats["client_gone"] == 1, "the gateway to leave a")
        assert s.fakes[0].stats["requests"] == s.fakes[1].stats["requests"] == 1


async def test_stream_cut_mid_answer_ends_with_error_event(make_stack: StackFactory) -> None:
    async with make_stack([FakeConfig(tokens=10, script=["cut:3"]), FakeConfig()]) as s:
        status, _, body = await s.post("/v1/chat/completions", STREAM)
        events = sse_events(body)
        assert status == 200
        assert content(events) == "tok " * 3  # what was sent stays sent, no failover
        assert "[DONE]" not in events
        assert events[-1]["error"]["code"] == "truncated_stream"
        assert s.fakes[1].stats["requests"] == 0
        assert await s.metric("infersight_gateway_truncated_streams_total", upstream="a") == 1
        assert (
            await s.metric(
                "infersight_gateway_requests_total", upstream="a", error="TruncatedStream"
            )
            == 1
        )


async def test_reset_mid_stream_is_a_truncation(make_stack: StackFactory) -> None:
    async with make_stack([FakeConfig(tokens=10, script=["reset:2"])]) as s:
        status, _, body = await s.post("/v1/chat/completions", STREAM)
        events = sse_events(body)
        assert status == 200 and content(events) == "tok " * 2
        assert events[-1]["error"]["type"] == "api_error"
        assert await s.metric("infersight_gateway_truncated_streams_total") == 1


async def test_malformed_sse_before_content_fails_over(make_stack: StackFactory) -> None:
    async with make_stack([FakeConfig(script=["malformed:0"]), FakeConfig(tokens=3)]) as s:
        status, _, body = await s.post("/v1/chat/completions", STREAM)
        assert status == 200 and content(sse_events(body)) == "tok " * 3
        assert (
            await s.metric(
                "infersight_gateway_failovers_total", upstream="a", error="MalformedStream"
            )
            == 1
        )


async def test_malformed_sse_after_content_is_a_truncation(make_stack: StackFactory) -> None:
    async with make_stack([FakeConfig(tokens=6, itl=0.05, script=["malformed:2"])]) as s:
        status, _, body = await s.post("/v1/chat/completions", STREAM)
        events = sse_events(body)
        assert status == 200 and content(events) == "tok " * 2
        assert "error" in events[-1]
        assert await s.metric("infersight_gateway_truncated_streams_total") == 1


async def test_hanging_upstream_honours_the_deadline(make_stack: StackFactory) -> None:
    async with make_stack([FakeConfig(script=["hang"])]) as s:
        fake = s.fakes[0]
        for n, body in enumerate((CHAT, STREAM), 1):
            fake.set_script(["hang"])
            status, headers, raw = await s.post(
                "/v1/chat/completions", body, {"X-Infersight-Deadline-Ms": "400"}
            )
            assert status == 504, raw
            err = orjson.loads(raw)["error"]
            assert err["type"] == "timeout" and err["code"] == "deadline_exceeded"
            assert headers["X-Request-Id"]
            # the hang lasts until the fake closes: the gateway hung up on it
            await until(
                lambda n=n: fake.stats["client_gone"] == n, "the upstream to see the gateway leave"
            )
            # the deadline ended it: the hang itself lasts until the test ends
            assert await s.metric("infersight_gateway_requests_total", status="504") == n


async def test_circuit_opens_then_closes_through_half_open_probe(make_stack: StackFactory) -> None:
    async with make_stack(
        [FakeConfig(script=[503, 503], tokens=2)],
        upstreams=[{"breaker_failures": 2, "breaker_cooldown_s": 0.5}],
    ) as s:
        for _ in range(2):
            status, _, _ = await s.post("/v1/chat/completions", CHAT)
            assert status == 503
        assert await s.metric("infersight_gateway_circuit_state", upstream="a") == 2
        # open: refused at the gateway, the upstream sees nothing
        status, headers, raw = await s.post("/v1/chat/completions", CHAT)
        assert status == 503 and int(headers["Retry-After"]) >= 1
        assert orjson.loads(raw)["error"]["code"] == "no_upstream_available"
        assert s.fakes[0].stats["requests"] == 2
        async with s.session.get(s.url + "/health") as r:
            assert r.status == 503
            assert any("model fake" in x for x in (await r.json())["reasons"])

        async def half_open() -> bool:
            return await s.metric("infersight_gateway_circuit_state", upstream="a") == 1

        await until_awaited(half_open, "the 0.5 s cooldown to half-open the circuit")
        status, _, _ = await s.post("/v1/chat/completions", CHAT)  # the probe
        assert status == 200
        assert await s.metric("infersight_gateway_circuit_state", upstream="a") == 0
        for state in ("open", "half_open", "closed"):
            assert (
                await s.metric(
                    "infersight_gateway_circuit_transitions_total", upstream="a", state=state
                )
                == 1
            )
        async with s.session.get(s.url + "/health") as r:
            assert r.status == 200


async def test_fallback_model_on_overload(make_stack: StackFactory) -> None:
    async with make_stack(
        [FakeConfig(script=[503] * 5, model="big"), FakeConfig(model="small", tokens=2)],
        upstreams=[{"models": ["big"]}, {"models": ["small"]}],
        fallbacks={"big": ["small"]},
    ) as s:
        status, _, raw = await s.post("/v1/chat/completions", {**CHAT, "model": "big"})
        assert status == 200 and orjson.loads(raw)["model"] == "small"
        assert (
            await s.metric("infersight_gateway_fallbacks_total", model="big", fallback="small") == 1
        )


async def test_first_byte_limit_lets_a_slow_non_streamed_answer_through(
    make_stack: StackFactory,
) -> None:
    # Engines send a non-streamed answer's head once it is generated: its own
    # first-byte limit (here 5 s) lets a slow one through while streams keep the TTFT.
    async with make_stack(
        [FakeConfig(ttft=0.1, itl=0.05, tokens=8)],
        upstreams=[{"ttft_timeout_s": 0.2, "first_byte_timeout_s": 5}],
    ) as s:
        status, _, raw = await s.post("/v1/chat/completions", CHAT)  # ~0.45 s in all
        assert status == 200, raw
        status, _, _ = await s.post("/v1/chat/completions", STREAM)  # first token at 0.1 s
        assert status == 200
