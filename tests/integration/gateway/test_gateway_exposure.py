"""Issue 12, gateway item 4: with keys configured only /health answers without one;
/metrics may be opened alone; shown URLs carry no credentials; refusals are AuthError."""

from __future__ import annotations

import orjson
import pytest
from gateway_stack import CHAT, StackFactory

from infersight.gateway import hash_key
from infersight_testkit.fake.openai import FakeConfig

KEY = "sk-gw-exposure-0123456789"
KEYS = [{"name": "ops", "sha256": hash_key(KEY)}]
AUTH = {"Authorization": f"Bearer {KEY}"}


async def _get(s: object, path: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    async with s.session.get(s.url + path, headers=headers) as r:  # type: ignore[attr-defined]
        return r.status, await r.read()


@pytest.mark.parametrize(
    "path", ["/stats", "/v1/models", "/metrics", "/no/such/path", "/v1/chat/completions"]
)
async def test_everything_but_health_needs_the_key(make_stack: StackFactory, path: str) -> None:
    async with make_stack([FakeConfig()], keys=KEYS) as s:
        status, raw = await _get(s, path)
        assert status == 401, raw
        err = orjson.loads(raw)["error"]
        assert err["type"] == "authentication_error" and err["code"] == "invalid_api_key"
        status, _ = await _get(s, path, {"Authorization": "Bearer sk-wrong"})
        assert status == 401
        status, raw = await _get(s, path, AUTH)
        assert status != 401, raw
        assert (await _get(s, "/health"))[0] == 200


async def test_metrics_can_be_opened_alone(make_stack: StackFactory) -> None:
    async with make_stack([FakeConfig()], keys=KEYS, metrics_public=True) as s:
        status, raw = await _get(s, "/metrics")
        assert status == 200 and b"infersight_gateway_requests_total" in raw
        assert (await _get(s, "/stats"))[0] == 401
        assert (await _get(s, "/v1/models"))[0] == 401


async def test_auth_refusals_are_counted_as_auth_errors(make_stack: StackFactory) -> None:
    async with make_stack([FakeConfig()], keys=KEYS) as s:
        assert (await s.post("/v1/chat/completions", CHAT))[0] == 401
        assert (await _get(s, "/stats"))[0] == 401
        s.admin_key = KEY
        assert (
            await s.metric("infersight_gateway_requests_total", status="401", error="AuthError")
            == 2
        )
        assert await s.metric("infersight_gateway_requests_total", error="BadRequest") == 0


async def test_shown_upstream_urls_have_no_credentials(make_stack: StackFactory) -> None:
    async with make_stack([FakeConfig()]) as s:
        real = s.fakes[0].base_url
    with_creds = real.replace("http://", "http://svc:hunter2@") + "?api-key=k123"
    async with make_stack([with_creds]) as s:
        status, raw = await _get(s, "/stats")
        (up,) = orjson.loads(raw)["upstreams"]
    assert status == 200
    assert up["url"] == real and b"hunter2" not in raw and b"k123" not in raw
