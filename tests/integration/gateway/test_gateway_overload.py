"""Overload: more concurrent clients than limit + queue; nothing is dropped silently."""

from __future__ import annotations

import asyncio

import orjson
from gateway_stack import CHAT, StackFactory

from infersight_testkit.fake.openai import FakeConfig
from support.waiting import until


async def test_surplus_gets_503_with_retry_after_and_everything_is_counted(
    make_stack: StackFactory,
) -> None:
    limit, queue, clients = 2, 3, 12
    async with make_stack(
        [FakeConfig(ttft=0.3, tokens=1)], upstreams=[{"concurrency": limit, "queue": queue}]
    ) as s:
        results = await asyncio.gather(
            *(s.post("/v1/chat/completions", CHAT) for _ in range(clients))
        )
        ok = [r for r in results if r[0] == 200]
        shed = [r for r in results if r[0] == 503]
        assert len(ok) == limit + queue and len(shed) == clients - limit - queue
        for _, headers, raw in shed:
            assert int(headers["Retry-After"]) >= 1
            assert orjson.loads(raw)["error"]["code"] == "queue_full"
        delays = sorted(float(h["X-Queue-Delay"]) for _, h, _ in ok)
        assert delays[:limit] == [0.0] * limit  # served at once
        assert all(d >= 200.0 for d in delays[limit:])  # queued behind a 0.3 s answer
        assert all("X-Queue-Delay" in h and "X-Request-Id" in h for _, h, _ in results)
        # every request is accounted for in the metrics
        assert await s.metric("infersight_gateway_requests_total") == clients
        assert await s.metric("infersight_gateway_requests_total", status="200") == len(ok)
        assert await s.metric("infersight_gateway_requests_total", status="503") == len(shed)
        assert await s.metric("infersight_gateway_rejections_total", reason="queue_full") == len(
            shed
        )
        assert await s.metric("infersight_gateway_queue_delay_seconds_count", upstream="a") == len(
            ok
        )
        assert s.fakes[0].stats["max_in_flight"] <= limit
        assert await s.metric("infersight_gateway_queue_depth", upstream="a") == 0
        assert await s.metric("infersight_gateway_in_flight", upstream="a") == 0


async def test_predicted_wait_beyond_deadline_is_shed_early(make_stack: StackFactory) -> None:
    async with make_stack(
        [FakeConfig(ttft=0.2, tokens=1)], upstreams=[{"concurrency": 1, "queue": 50}]
    ) as s:
        # learn the drain rate (~5/s) from a few requests
        for _ in range(3):
            assert (await s.post("/v1/chat/completions", CHAT))[0] == 200
        busy = [asyncio.create_task(s.post("/v1/chat/completions", CHAT)) for _ in range(6)]
        adm = s.gw.upstreams[0].admission
        await until(lambda: adm.queued >= 4, "the requests to queue in the gateway")
        status, headers, raw = await s.post(
            "/v1/chat/completions", CHAT, {"X-Infersight-Deadline-Ms": "300"}
        )
        assert status == 503, raw
        assert orjson.loads(raw)["error"]["code"] == "predicted_wait_exceeds_deadline"
        assert int(headers["Retry-After"]) >= 1
        assert all(r[0] == 200 for r in await asyncio.gather(*busy))


async def test_priority_header_is_served_first(make_stack: StackFactory) -> None:
    async with make_stack(
        [FakeConfig(ttft=0.4, tokens=1)], upstreams=[{"concurrency": 1, "queue": 10}]
    ) as s:
        order: list[str] = []
        adm = s.gw.upstreams[0].admission

        async def one(name: str, prio: int | None) -> None:
            h = {"X-Infersight-Priority": str(prio)} if prio is not None else None
            status, _, _ = await s.post("/v1/chat/completions", CHAT, h)
            assert status == 200
            order.append(name)

        first = asyncio.create_task(one("first", None))
        await until(lambda: adm.inflight == 1, "the first request in flight")
        lows = [asyncio.create_task(one(f"low{i}", None)) for i in range(3)]
        await until(lambda: adm.queued >= 3, "the low ones to queue")
        high = asyncio.create_task(one("high", 10))
        await asyncio.gather(first, high, *lows)
        assert order[:2] == ["first", "high"]


async def test_adaptive_limit_backs_off_when_the_upstream_sheds(make_stack: StackFactory) -> None:
    # The upstream answers 429 above 4 requests in flight; AIMD starts at 16 and must
    # come down, after which requests stop being refused upstream.
    async with make_stack(
        [FakeConfig(ttft=0.05, tokens=1, max_concurrency=4)],
        upstreams=[{"concurrency": 16, "queue": 200, "limiter": "aimd", "min_concurrency": 1}],
    ) as s:
        adm = s.gw.upstreams[0].admission
        first = await asyncio.gather(*(s.post("/v1/chat/completions", CHAT) for _ in range(16)))
        for _ in range(5):
            await asyncio.gather(*(s.post("/v1/chat/completions", CHAT) for _ in range(16)))
        assert adm.limit <= 8
        s.fakes[0].reset_stats()
        res = await asyncio.gather(*(s.post("/v1/chat/completions", CHAT) for _ in range(16)))
        # With the limit near the upstream's 4, most requests wait in the gateway's
        # queue instead of being refused upstream: more succeed than in the first round.
        ok_first = sum(r[0] == 200 for r in first)
        ok_last = sum(r[0] == 200 for r in res)
        assert ok_last >= 12 and ok_last >= ok_first
        assert await s.metric("infersight_gateway_concurrency_limit", upstream="a") == adm.limit
