"""Gateway keys, per-key limits, cost accounting, cost routing, /v1/models, logs."""

from __future__ import annotations

import logging
from pathlib import Path

import orjson
import pytest
from gateway_stack import CHAT, StackFactory

from infersight.gateway import hash_key
from infersight_testkit.fake.openai import FakeConfig

GOOD = "sk-gw-test-good-0123456789"
LIMITED = "sk-gw-test-limited-987654"


async def test_keys_and_per_key_rate_limit(
    make_stack: StackFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="infersight.gateway.access")
    keys = [
        {"name": "team-a", "sha256": hash_key(GOOD)},
        {"name": "team-b", "sha256": hash_key(LIMITED), "requests_per_minute": 2},
    ]
    async with make_stack([FakeConfig(tokens=1)], keys=keys) as s:
        status, headers, raw = await s.post("/v1/chat/completions", CHAT)
        assert status == 401 and orjson.loads(raw)["error"]["type"] == "authentication_error"
        status, _, raw = await s.post(
            "/v1/chat/completions", CHAT, {"Authorization": "Bearer sk-wrong"}
        )
        assert status == 401 and orjson.loads(raw)["error"]["code"] == "invalid_api_key"
        for _ in range(3):
            status, _, _ = await s.post(
                "/v1/chat/completions", CHAT, {"Authorization": f"Bearer {GOOD}"}
            )
            assert status == 200
        auth = {"Authorization": f"Bearer {LIMITED}"}
        assert (await s.post("/v1/chat/completions", CHAT, auth))[0] == 200
        assert (await s.post("/v1/chat/completions", CHAT, auth))[0] == 200
        status, headers, raw = await s.post("/v1/chat/completions", CHAT, auth)
        assert status == 429
        assert 20 <= int(headers["Retry-After"]) <= 31  # 2/min refills one every 30 s
        assert orjson.loads(raw)["error"]["type"] == "rate_limit_error"
        assert s.fakes[0].stats["requests"] == 5
        s.admin_key = GOOD
        assert await s.metric("infersight_gateway_rejections_total", reason="auth") == 2
        assert await s.metric("infersight_gateway_rejections_total", reason="rate_limited") == 1
        assert (
            await s.metric("infersight_gateway_tokens_total", key="team-a", kind="completion") == 3
        )
        metrics_text = (
            await (
                await s.session.get(s.url + "/metrics", headers={"Authorization": f"Bearer {GOOD}"})
            ).read()
        ).decode()
    logged = caplog.text
    assert '"key":"team-a"' in logged and '"request_id":' in logged
    for secret in (GOOD, LIMITED, "sk-wrong"):
        assert secret not in logged and secret not in metrics_text


async def test_per_key_token_limit(make_stack: StackFactory) -> None:
    keys = [{"name": "t", "sha256": hash_key(GOOD), "tokens_per_minute": 10}]
    async with make_stack([FakeConfig(tokens=12)], keys=keys) as s:
        auth = {"Authorization": f"Bearer {GOOD}"}
        assert (await s.post("/v1/chat/completions", CHAT, auth))[0] == 200  # uses 13 tokens
        status, headers, _ = await s.post("/v1/chat/completions", CHAT, auth)
        assert status == 429 and int(headers["Retry-After"]) >= 1


async def test_cost_per_model_and_key(make_stack: StackFactory, tmp_path: Path) -> None:
    prices = tmp_path / "prices.toml"
    prices.write_text('[models."fake"]\ninput = 1000000.0\noutput = 2000000.0\n')
    async with make_stack([FakeConfig(tokens=4)], prices_file=str(prices)) as s:
        status, _, raw = await s.post("/v1/chat/completions", CHAT)  # usage 2 in, 4 out
        usage = orjson.loads(raw)["usage"]
        status2, _, _ = await s.post("/v1/chat/completions", {**CHAT, "stream": True})
        assert status == status2 == 200
        expected = 2 * (usage["prompt_tokens"] * 1.0 + usage["completion_tokens"] * 2.0)
        assert await s.metric("infersight_gateway_cost_usd_total", model="fake") == pytest.approx(
            expected
        )
        async with s.session.get(s.url + "/stats") as r:
            stats = await r.json()
        assert stats["cost"]["by_model"]["fake"]["cost_usd"] == pytest.approx(expected)
        assert stats["cost"]["by_key"]["-"]["completion_tokens"] == 8


async def test_cost_rule_sends_small_requests_to_the_cheaper_model(
    make_stack: StackFactory,
) -> None:
    async with make_stack(
        [FakeConfig(model="big", tokens=1), FakeConfig(model="small", tokens=1)],
        upstreams=[{"models": ["big"]}, {"models": ["small"]}],
        cost_rules=[{"model": "big", "cheaper": "small", "max_tokens": 100}],
    ) as s:
        _, _, raw = await s.post("/v1/chat/completions", {**CHAT, "model": "big", "max_tokens": 10})
        assert orjson.loads(raw)["model"] == "small"
        _, _, raw = await s.post(
            "/v1/chat/completions", {**CHAT, "model": "big", "max_tokens": 1000}
        )
        assert orjson.loads(raw)["model"] == "big"


async def test_models_is_the_union_and_replicas_share_load(make_stack: StackFactory) -> None:
    async with make_stack(
        [
            FakeConfig(model="m1", ttft=0.05, tokens=1),
            FakeConfig(model="m1", ttft=0.05, tokens=1),
            FakeConfig(model="m2"),
        ],
        upstreams=[{"models": []}, {"models": ["m1"]}, {"models": []}],  # a, c discovered
    ) as s:
        async with s.session.get(s.url + "/v1/models") as r:
            doc = await r.json()
        ids = {m["id"]: m["upstreams"] for m in doc["data"]}
        assert ids == {"m1": ["a", "b"], "m2": ["c"]}
        import asyncio

        res = await asyncio.gather(
            *(s.post("/v1/chat/completions", {**CHAT, "model": "m1"}) for _ in range(8))
        )
        assert all(r[0] == 200 for r in res)
        a, b = s.fakes[0].stats["requests"], s.fakes[1].stats["requests"]
        assert a + b == 8 and min(a, b) >= 3  # least-outstanding spreads concurrent load
