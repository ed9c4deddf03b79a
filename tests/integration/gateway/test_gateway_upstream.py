"""Upstream keys from the environment; a client that leaves mid-stream."""

from __future__ import annotations

import pytest
from gateway_stack import CHAT, StackFactory

from infersight.core.errors import ConfigError
from infersight_testkit.fake.openai import FakeConfig
from support.waiting import until, until_awaited


async def test_upstream_key_comes_from_the_named_env_var(
    make_stack: StackFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-upstream-secret-4242424242"
    monkeypatch.setenv("GW_TEST_UPSTREAM_KEY", secret)
    async with make_stack(
        [FakeConfig(api_key=secret, tokens=1)], upstreams=[{"api_key_env": "GW_TEST_UPSTREAM_KEY"}]
    ) as s:
        status, _, _ = await s.post("/v1/chat/completions", CHAT)
        assert status == 200 and s.fakes[0].stats["auth_failures"] == 0
    monkeypatch.setenv("GW_TEST_UPSTREAM_KEY", "changeme")  # a placeholder is refused
    with pytest.raises(ConfigError) as ei:
        async with make_stack([FakeConfig()], upstreams=[{"api_key_env": "GW_TEST_UPSTREAM_KEY"}]):
            pass
    assert "GW_TEST_UPSTREAM_KEY" in str(ei.value) and "changeme" not in str(ei.value)


async def test_upstream_rejecting_the_gateway_key_is_a_502(make_stack: StackFactory) -> None:
    async with make_stack([FakeConfig(api_key="sk-right")]) as s:
        status, _, raw = await s.post("/v1/chat/completions", CHAT)
        assert status == 502 and b"sk-right" not in raw


async def test_client_leaving_mid_stream_frees_the_upstream(make_stack: StackFactory) -> None:
    async with make_stack([FakeConfig(tokens=200, itl=0.02)]) as s:
        async with s.session.post(
            s.url + "/v1/chat/completions", json={**CHAT, "stream": True}
        ) as r:
            assert r.status == 200
            await r.content.readany()
            r.close()  # hang up after the first bytes

        async def counted() -> bool:
            return await s.metric("infersight_gateway_requests_total", status="499") == 1

        await until_awaited(counted, "the gateway to count the hang-up", poll=0.05)
        assert await s.metric("infersight_gateway_in_flight", upstream="a") == 0
        # the upstream request was dropped too: the fake sees the gateway leave
        await until(lambda: s.fakes[0].stats["client_gone"] == 1, "the upstream to be left")
        assert s.fakes[0].stats["in_flight"] == 0
