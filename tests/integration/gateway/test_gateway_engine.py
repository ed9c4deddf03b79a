"""The official openai client through the gateway to the real embedded engine."""

from __future__ import annotations

from typing import Any

import openai
import pytest

from infersight.gateway import Gateway, load_config

pytestmark = pytest.mark.engine


async def test_openai_client_through_gateway_to_engine(engine: Any) -> None:
    cfg = load_config(
        None,
        port=0,
        upstreams=[
            {
                "name": "engine",
                "url": engine.base_url,
                "models": [engine.model_name],
                "concurrency": 8,
                "ttft_timeout_s": 60,
            },
        ],
    )
    async with Gateway(cfg).running() as gw:
        client = openai.AsyncOpenAI(base_url=gw.url + "/v1", api_key="unused", max_retries=0)
        try:
            models = await client.models.list()
            assert [m.id for m in models.data] == [engine.model_name]

            msgs: Any = [{"role": "user", "content": "Say hello."}]
            done = await client.chat.completions.create(
                model=engine.model_name, messages=msgs, max_tokens=8
            )
            assert done.choices[0].message.content
            assert done.usage is not None and done.usage.completion_tokens >= 1

            # streamed, without asking for usage: the usage-only chunk must not leak
            chunks = [
                c
                async for c in await client.chat.completions.create(
                    model=engine.model_name, messages=msgs, max_tokens=8, stream=True
                )
            ]
            text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
            assert text and all(c.usage is None or c.choices for c in chunks)
            assert chunks[-1].choices[0].finish_reason in ("stop", "length")

            # streamed, asking for usage: it arrives
            chunks = [
                c
                async for c in await client.chat.completions.create(
                    model=engine.model_name,
                    messages=msgs,
                    max_tokens=8,
                    stream=True,
                    stream_options={"include_usage": True},
                )
            ]
            assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens >= 1

            comp = await client.completions.create(
                model=engine.model_name, prompt="The sky is", max_tokens=4
            )
            assert comp.choices[0].text
            raw = await client.chat.completions.with_raw_response.create(
                model=engine.model_name, messages=msgs, max_tokens=2
            )
            assert raw.headers.get("x-queue-delay") is not None
            assert raw.headers.get("x-request-id")
        finally:
            await client.close()
        text_metrics = gw.metrics.render().decode()
        assert 'infersight_gateway_requests_total{endpoint="chat"' in text_metrics
        # streamed usage was counted even when the client did not ask for it
        tokens = gw.metrics.tokens.labels(engine.model_name, "-", "completion")._value.get()
        assert tokens >= 4
