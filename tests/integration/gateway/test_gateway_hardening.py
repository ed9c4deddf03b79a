"""Issue 12, gateway items 1-3: non-streamed failover on silence, upstream 4xx passed
through, no upstream URL in client errors, truncated-stream accounting, failovers
counted only when there is one, and a client that leaves frees its upstream slot."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import aiohttp
import orjson
import pytest
from gateway_stack import CHAT, StackFactory
from test_gateway_faults import STREAM, closed_port_url, sse_events

from infersight_testkit.fake.openai import FakeConfig
from support.waiting import until

FALLBACK: dict[str, Any] = {"max_attempts": 2, "ttft_timeout_s": 1.0, "idle_timeout_s": 1.0}


@pytest.mark.parametrize("fault", ["hang", "stall_body:60"])
async def test_non_streamed_silence_fails_over_within_the_limits(
    make_stack: StackFactory, fault: str
) -> None:
    # A primary that accepts and never answers (or stalls in its body) and a healthy
    # fallback: the non-streamed request moves on after the 1 s limit, far before the
    # 30 s deadline, as a stream would.
    async with make_stack(
        [FakeConfig(script=[fault] * 4), FakeConfig(tokens=2)],
        upstreams=[FALLBACK, {}],
        default_deadline_s=30,
    ) as s:
        status, _, raw = await s.post("/v1/chat/completions", CHAT)
        assert status == 200, raw
        # answered, not a 504 at the 30 s deadline (a silence without a limit would
        # wait for that): a's 1 s limit moved the request to b
        kind = "FirstTokenTimeout" if fault == "hang" else "IdleTimeout"
        assert (
            await s.metric("infersight_gateway_upstream_errors_total", upstream="a", error=kind)
            >= 1
        )
        assert await s.metric("infersight_gateway_failovers_total", upstream="a") == 1


async def test_upstream_client_errors_pass_through_unchanged(make_stack: StackFactory) -> None:
    bodies = [
        {
            "error": {
                "message": "This model's maximum context length is 4096 tokens.",
                "type": "invalid_request_error",
                "code": "context_length_exceeded",
                "param": "messages",
            }
        },
        {
            "error": {
                "message": "Your request was rejected by the safety system.",
                "type": "invalid_request_error",
                "code": "content_policy_violation",
                "param": None,
            }
        },
    ]
    script = [{"status": 400, "body": b} for b in bodies]
    script.append(
        {
            "status": 422,
            "body": {
                "object": "error",
                "message": "bad top_k",
                "type": "BadRequestError",
                "param": "top_k",
                "code": 422,
            },
        }
    )
    async with make_stack([FakeConfig(script=script)]) as s:
        for want in bodies:
            status, _, raw = await s.post("/v1/chat/completions", CHAT)
            assert status == 400 and orjson.loads(raw) == want
        status, _, raw = await s.post("/v1/chat/completions", CHAT)
        # vLLM/SGLang's flat shape: the same values in the OpenAI envelope
        assert status == 422 and orjson.loads(raw) == {
            "error": {
                "message": "bad top_k",
                "type": "BadRequestError",
                "param": "top_k",
                "code": 422,
            }
        }


async def test_no_upstream_url_reaches_the_client(
    make_stack: StackFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="infersight.gateway")
    with closed_port_url() as url:
        dead = url.replace("http://", "http://svc:s3cret@")
        async with make_stack(
            [dead, FakeConfig(script=[500, 500])], upstreams=[{}, {"name": "b"}]
        ) as s:
            status, _, raw = await s.post("/v1/chat/completions", CHAT)
            b_url = s.fakes[0].base_url
    assert status == 502
    err = orjson.loads(raw)["error"]
    text = raw.decode()
    for leak in ("127.0.0.1", "http://", "s3cret", "svc:", b_url):
        assert leak not in text, text
    assert err["message"].startswith("upstream b failed (HTTP 500)"), err
    # The log has the details: the URL (without its credentials) of each failure.
    assert b_url in caplog.text and "s3cret" not in caplog.text
    assert "upstream a: ConnectError" in caplog.text


async def test_truncated_stream_counts_what_was_delivered(
    make_stack: StackFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="infersight.gateway.access")
    body = {**STREAM, "messages": [{"role": "user", "content": "x" * 400}]}
    async with make_stack([FakeConfig(tokens=100, script=["cut:40"])]) as s:
        status, _, raw = await s.post("/v1/chat/completions", body)
        assert status == 200
        events = sse_events(raw)
        assert "error" in events[-1] and "[DONE]" not in events
        completion = await s.metric("infersight_gateway_tokens_total", kind="completion")
        prompt = await s.metric("infersight_gateway_tokens_total", kind="prompt")
    assert completion == 40  # the 40 content chunks the client got
    assert prompt >= 90  # 400 characters of prompt were read upstream (~100 tokens)
    (line,) = [
        orjson.loads(r.getMessage())
        for r in caplog.records
        if r.name == "infersight.gateway.access"
    ]
    assert line["truncated"] is True and line["usage_estimated"] is True
    assert line["completion_tokens"] == 40 and line["error"] == "TruncatedStream"


async def test_failover_is_counted_only_when_another_upstream_takes_over(
    make_stack: StackFactory,
) -> None:
    async with make_stack([FakeConfig(script=[503] * 3)]) as s:
        status, _, _ = await s.post("/v1/chat/completions", CHAT)
        assert status == 503
        assert await s.metric("infersight_gateway_failovers_total") == 0
        assert await s.metric("infersight_gateway_upstream_errors_total", error="Overloaded") == 1
    async with make_stack([FakeConfig(script=[503]), FakeConfig(tokens=2)]) as s:
        status, _, raw = await s.post("/v1/chat/completions", CHAT)
        assert status == 200, raw
        assert (
            await s.metric("infersight_gateway_failovers_total", upstream="a", error="Overloaded")
            == 1
        )


async def test_client_leaving_before_the_first_byte_frees_the_upstream_slot(
    make_stack: StackFactory,
) -> None:
    # One slot upstream; a request that hangs there and whose client gives up must
    # not keep the slot until the upstream answers.
    async with make_stack(
        [FakeConfig(tokens=2, script=["hang"])], upstreams=[{"concurrency": 1, "queue": 4}]
    ) as s:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.5):
                await s.post("/v1/chat/completions", CHAT)
        up = s.gw.upstreams[0]
        await until(lambda: up.admission.inflight == 0, "the left request's slot to be freed")
        # the one slot is free: the next request is admitted, not queued behind the hang
        async with (
            aiohttp.ClientSession() as other,
            other.post(s.url + "/v1/chat/completions", json=CHAT) as r,
        ):
            assert r.status == 200
        assert up.admission.inflight == 0
        # The upstream saw its connection dropped (the request was cancelled there).
        assert s.fakes[0].stats["in_flight"] == 0 and s.fakes[0].stats["client_gone"] == 1
        assert (
            await s.metric("infersight_gateway_requests_total", status="499", error="Cancelled")
            == 1
        )


@pytest.mark.parametrize("fault", ["hang", "stall_body:60"])
async def test_silence_without_configured_limits_fails_over_within_the_deadline(
    make_stack: StackFactory, fault: str
) -> None:
    # No first-byte or idle limit is configured: each attempt gets at most half the
    # time left to the deadline (3 s here), so a primary that goes silent, at its start
    # or in the middle of its body, leaves room for the fallback to answer in time.
    async with make_stack(
        [FakeConfig(script=[fault] * 4), FakeConfig(tokens=2)], upstreams=[{"max_attempts": 1}, {}]
    ) as s:
        status, _, raw = await s.post(
            "/v1/chat/completions", CHAT, headers={"X-Infersight-Deadline-Ms": "3000"}
        )
        # answered: b was asked inside the deadline, not a 504 past it; a was asked
        # first and left (its silence never ends by itself)
        assert status == 200, raw
        assert s.fakes[0].stats["requests"] == s.fakes[1].stats["requests"] == 1
        assert await s.metric("infersight_gateway_failovers_total", upstream="a") == 1
        await until(lambda: s.fakes[0].stats["client_gone"] == 1, "the gateway to leave a")
