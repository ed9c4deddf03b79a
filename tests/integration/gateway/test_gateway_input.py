"""Bad input gets 4xx with an OpenAI error body; fuzzed bodies never get a gateway 5xx."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import aiohttp
import orjson
import pytest
from gateway_stack import CHAT, StackFactory
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infersight.gateway import Gateway, load_config
from infersight_testkit.fake.openai import FakeConfig, FakeOpenAI


def assert_openai_error(status: int, raw: bytes, expect: int) -> dict[str, Any]:
    assert status == expect, raw
    err = orjson.loads(raw)["error"]
    assert set(err) >= {"message", "type", "code"} and err["message"]
    return dict(err)


async def raw_post(
    s: Any, path: str, data: bytes, headers: dict[str, str] | None = None
) -> tuple[int, bytes]:
    async with s.session.post(
        s.url + path, data=data, headers={"Content-Type": "application/json", **(headers or {})}
    ) as r:
        return r.status, await r.read()


async def test_bad_inputs(make_stack: StackFactory) -> None:
    async with make_stack([FakeConfig(tokens=1)], max_body_bytes=4096) as s:
        path = "/v1/chat/completions"
        cases: list[tuple[bytes, int, str]] = [
            (b"{not json", 400, "invalid_json"),
            (b"", 400, "empty_body"),
            (b"[1, 2]", 400, "invalid_json"),
            (b'{"model": "fake", "messages": "hi"}', 400, "invalid_request"),
            (b'{"messages": [{"role": "user", "content": "x"}]}', 400, "invalid_request"),
            (
                b'{"model": 7, "messages": [{"role": "user", "content": "x"}]}',
                400,
                "invalid_request",
            ),
            (
                b'{"model": "fake", "messages": [{"role": "user"}], "max_tokens": "9"}',
                400,
                "invalid_request",
            ),
            (
                b'{"model": "fake", "messages": [{"role": "user"}], "stream": "yes"}',
                400,
                "invalid_request",
            ),
            (
                b'{"model": "nope", "messages": [{"role": "user", "content": "x"}]}',
                404,
                "model_not_found",
            ),
            (
                b'{"model": "fake", "messages": [{"role": "user", "content": "\xff\xfe"}]}',
                400,
                "invalid_utf8",
            ),
            (b'{"model": "fake", "pad": "' + b"x" * 5000 + b'"}', 413, "body_too_large"),
        ]
        for data, status, code in cases:
            st_, raw = await raw_post(s, path, data)
            err = assert_openai_error(st_, raw, status)
            assert err["code"] == code, (data[:60], err)
        st_, raw = await raw_post(s, path, orjson.dumps(CHAT), {"X-Infersight-Deadline-Ms": "-5"})
        assert_openai_error(st_, raw, 400)
        st_, raw = await raw_post(s, "/v1/embeddings", b'{"model": "fake", "input": [1, "a"]}')
        assert_openai_error(st_, raw, 400)
        assert s.fakes[0].stats["requests"] == 0  # nothing invalid reached the upstream
        assert await s.metric("infersight_gateway_requests_total", status="400") == 11
        assert await s.metric("infersight_gateway_requests_total", status="404") == 1
        assert await s.metric("infersight_gateway_requests_total", status="413") == 1
        assert await s.metric("infersight_gateway_rejections_total", reason="bad_request") == 13


async def test_request_id_is_propagated_or_created(make_stack: StackFactory) -> None:
    async with make_stack([FakeConfig(tokens=1)]) as s:
        status, headers, raw = await s.post(
            "/v1/chat/completions", CHAT, {"X-Request-Id": "trace-42"}
        )
        assert status == 200 and headers["X-Request-Id"] == "trace-42"
        assert orjson.loads(raw)["id"].startswith("chatcmpl-trace-42")  # the fake echoes it
        _, headers2, _ = await s.post("/v1/chat/completions", CHAT)
        assert headers2["X-Request-Id"].startswith("req-")


# -- fuzz: a gateway in its own thread, hit synchronously by Hypothesis -----------------
@pytest.fixture(scope="module")
def fuzz_url() -> Iterator[str]:
    ready = threading.Event()
    box: dict[str, Any] = {}

    async def main() -> None:
        async with FakeOpenAI(FakeConfig(tokens=2)).running() as fake:
            cfg = load_config(
                None,
                port=0,
                access_log=False,
                max_body_bytes=64 * 1024,
                upstreams=[{"name": "a", "url": fake.base_url, "models": ["fake"]}],
            )
            async with Gateway(cfg).running() as gw:
                box["url"], box["loop"], box["stop"] = (
                    gw.url,
                    asyncio.get_running_loop(),
                    asyncio.Event(),
                )
                ready.set()
                await box["stop"].wait()

    t = threading.Thread(target=lambda: asyncio.run(main()), daemon=True)
    t.start()
    assert ready.wait(30)
    yield box["url"]
    box["loop"].call_soon_threadsafe(box["stop"].set)
    t.join(10)


json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-10, 10**6),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
)
json_val = st.recursive(
    json_leaf,
    lambda c: st.one_of(
        st.lists(c, max_size=4), st.dictionaries(st.text(max_size=8), c, max_size=4)
    ),
    max_leaves=12,
)
body_st = st.fixed_dictionaries(
    {},
    optional={
        "model": st.one_of(st.just("fake"), json_leaf),
        "messages": st.one_of(
            st.lists(
                st.fixed_dictionaries(
                    {"role": st.sampled_from(["user", "system"])}, optional={"content": json_val}
                ),
                max_size=3,
            ),
            json_val,
        ),
        "prompt": json_val,
        "input": json_val,
        "stream": st.one_of(st.booleans(), json_leaf),
        "max_tokens": st.one_of(st.integers(-5, 8), json_leaf),
        "temperature": json_leaf,
        "n": json_leaf,
        "stream_options": json_val,
    },
).flatmap(
    lambda d: st.dictionaries(st.text(max_size=6), json_val, max_size=3).map(
        lambda extra: {**extra, **d}
    )
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    path=st.sampled_from(["/v1/chat/completions", "/v1/completions", "/v1/embeddings"]),
    body=st.one_of(body_st, json_val.map(lambda v: v)),
    garbage=st.one_of(st.none(), st.binary(max_size=64)),
)
def test_fuzzed_bodies_never_get_a_gateway_5xx(
    fuzz_url: str, path: str, body: Any, garbage: bytes | None
) -> None:
    data = garbage if garbage is not None else orjson.dumps(body)

    async def go() -> tuple[int, bytes]:
        async with (
            aiohttp.ClientSession() as session,
            session.post(
                fuzz_url + path, data=data, headers={"Content-Type": "application/json"}
            ) as r,
        ):
            return r.status, await r.read()

    status, raw = asyncio.run(go())
    assert status < 500, (status, raw[:300])
    if status >= 400:
        err = orjson.loads(raw)["error"]
        assert isinstance(err["message"], str) and err["type"] and err["code"]


async def test_unknown_paths_and_methods_get_openai_errors(make_stack: StackFactory) -> None:
    async with make_stack([FakeConfig(tokens=1)]) as s:
        async with s.session.get(s.url + "/v1/chat/completions") as r:
            assert_openai_error(r.status, await r.read(), 405)
            assert r.headers["X-Queue-Delay"] == "0.000" and r.headers["X-Request-Id"]
        async with s.session.post(s.url + "/v2/nothing", data=b"{}") as r:
            assert_openai_error(r.status, await r.read(), 404)
