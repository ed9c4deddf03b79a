"""What a LiteLLM user expects of the gateway in the first hour: the cost on the answer
(a header, or usage.cost in a stream), a "did you mean" for a near-miss model, a key
from --api-key-env named after its variable, a start-up banner like serve's."""

from __future__ import annotations

import os
from pathlib import Path

import openai
import orjson
import pytest
from gateway_stack import CHAT, StackFactory

from infersight.core.pricing import PriceTable
from infersight.gateway.cost_stamp import stamp_usage
from infersight_testkit.cli_process import interrupt, start_cli
from infersight_testkit.fake.openai import FakeConfig, FakeOpenAI

PRICE = '[models."fake"]\ninput = 1000000.0\noutput = 2000000.0\n'  # $1 / $2 per token


def _expected(prompt: int, completion: int, prices: Path) -> float:
    price = PriceTable.load(str(prices)).price("fake")
    assert price is not None
    return price.cost(prompt, completion)


async def test_cost_on_the_answer_header_and_stream_usage(
    make_stack: StackFactory, tmp_path: Path
) -> None:
    prices = tmp_path / "prices.toml"
    prices.write_text(PRICE)
    async with make_stack([FakeConfig(tokens=4)], prices_file=str(prices)) as s:
        status, headers, body = await s.post("/v1/chat/completions", CHAT)
        assert status == 200
        usage = orjson.loads(body)["usage"]
        dollars = _expected(usage["prompt_tokens"], usage["completion_tokens"], prices)
        assert float(headers["X-Infersight-Cost-USD"]) == pytest.approx(dollars, rel=1e-8)
        # the official client, streaming with usage: the usage chunk carries the cost
        client = openai.AsyncOpenAI(base_url=s.url + "/v1", api_key="x", max_retries=0)
        chunks = [
            c
            async for c in await client.chat.completions.create(
                model="fake",
                messages=CHAT["messages"],
                stream=True,
                stream_options={"include_usage": True},
            )
        ]
        last = chunks[-1]
        assert last.usage is not None and not last.choices
        assert last.usage.model_extra is not None
        cost = last.usage.model_extra["cost"]
        assert cost == pytest.approx(
            _expected(last.usage.prompt_tokens, last.usage.completion_tokens, prices)
        )
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert text  # the content went through untouched
        # without include_usage there is no usage chunk and no cost, as before
        plain = [
            c
            async for c in await client.chat.completions.create(
                model="fake", messages=CHAT["messages"], stream=True
            )
        ]
        assert all(c.usage is None for c in plain)
        # the access log's figure and the metric are the same dollars
        total = await s.metric("infersight_gateway_cost_usd_total", model="fake")
        assert total == pytest.approx(
            dollars + cost + _expected(usage["prompt_tokens"], usage["completion_tokens"], prices),
            rel=1e-6,
        )
        await client.close()


async def test_an_unpriced_model_gets_no_cost(make_stack: StackFactory) -> None:
    async with make_stack([FakeConfig(tokens=2)]) as s:  # "fake" is not in the shipped table
        status, headers, _ = await s.post("/v1/chat/completions", CHAT)
        assert status == 200 and "X-Infersight-Cost-USD" not in headers


def test_stamp_usage_touches_only_the_usage_chunk() -> None:
    content = b'data: {"id":"1","choices":[{"delta":{"content":"hi"}}]}\n\n'
    usage = b'data: {"id":"1","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1}}\n\n'
    done = b"data: [DONE]\n\n"
    out = stamp_usage(content + usage + done, 0.25)
    assert out is not None and out.startswith(content) and out.endswith(done)
    doc = orjson.loads(out[len(content) : -len(done)].removeprefix(b"data: "))
    assert doc["usage"] == {"prompt_tokens": 3, "completion_tokens": 1, "cost": 0.25}
    assert stamp_usage(content + done, 0.25) is None  # no usage chunk: nothing to stamp
    assert stamp_usage(b"data: {not json\n\n", 0.25) is None


async def test_a_near_miss_model_gets_did_you_mean(make_stack: StackFactory) -> None:
    async with make_stack(
        [FakeConfig(tokens=2)],
        upstreams=[{"models": ["meta-llama/Llama-3.1-8B-Instruct", "qwen2.5-7b"]}],
    ) as s:
        for asked, meant in (
            ("llama-3.1-8b-instruct", "meta-llama/Llama-3.1-8B-Instruct"),
            ("Qwen2.5-7B", "qwen2.5-7b"),
            ("qwen2.5-7", "qwen2.5-7b"),
        ):
            status, _, body = await s.post("/v1/chat/completions", {**CHAT, "model": asked})
            err = orjson.loads(body)["error"]
            assert status == 404 and err["code"] == "model_not_found", body
            assert f"did you mean {meant!r}?" in err["message"], err
        status, _, body = await s.post("/v1/chat/completions", {**CHAT, "model": "mistral"})
        assert status == 404 and "did you mean" not in orjson.loads(body)["error"]["message"]


def test_banner_and_a_key_named_after_its_variable() -> None:
    os.environ["FIRST_HOUR_GW_KEY"] = "sk-first-hour-1"
    with FakeOpenAI.subprocess(FakeConfig(tokens=2)) as fake:
        try:
            proc, first, url = start_cli(
                "--upstream",
                f"a={fake.base_url},models=fake",
                "--port",
                "0",
                "--api-key-env",
                "FIRST_HOUR_GW_KEY",
            )
        finally:
            del os.environ["FIRST_HOUR_GW_KEY"]
        try:
            assert first.startswith(
                f"infersight gateway: listening on {url}  (OpenAI API: {url}/v1)"
            )
            banner = []
            while "Press Ctrl-C" not in (line := proc.stderr.readline()):  # type: ignore[union-attr]
                banner.append(" ".join(line.split()))
            assert banner[0] == f"upstream a={fake.base_url} (fake; static limit 32, queue 128)"
            assert "models fake" in banner
            assert "api key required (1 key: FIRST_HOUR_GW_KEY)" in banner
            assert f"metrics {url}/metrics (with a key)" in banner
            client = openai.OpenAI(base_url=f"{url}/v1", api_key="sk-first-hour-1", max_retries=0)
            client.chat.completions.create(model="fake", messages=CHAT["messages"])
            import urllib.request

            req = urllib.request.Request(
                url + "/metrics", headers={"Authorization": "Bearer sk-first-hour-1"}
            )
            with urllib.request.urlopen(req, timeout=10) as r:
                text = r.read().decode()
            assert 'key="FIRST_HOUR_GW_KEY"' in text and 'key="cli"' not in text
        finally:
            assert interrupt(proc, 30) == 0
        rest = proc.stderr.read() + proc.stdout.read()  # type: ignore[union-attr]
        assert "sk-first-hour-1" not in rest
