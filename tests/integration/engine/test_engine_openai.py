"""The real embedded engine through the official ``openai`` client and raw HTTP."""

from __future__ import annotations

import asyncio
import json
import urllib.request
from typing import Any

import openai
import pytest

from infersight.client import Client
from infersight.engine.threads import SPIN_COUNT

pytestmark = pytest.mark.engine

MESSAGES = [{"role": "user", "content": "Say hello in five words."}]


def _client(engine: Any) -> Any:
    return openai.OpenAI(base_url=engine.base_url + "/v1", api_key="unused", max_retries=0)


def _get(url: str) -> tuple[int, bytes]:
    with urllib.request.urlopen(url, timeout=30) as r:
        return r.status, r.read()


def _post(url: str, body: dict[str, Any]) -> Any:
    req = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())


def test_engine_properties(engine: Any) -> None:
    assert engine.base_url.startswith("http://127.0.0.1:") and not engine.base_url.endswith("/v1")
    assert engine.model_name == "SmolLM2-135M-Instruct"
    assert engine.running and engine.pid > 0
    s = engine.settings
    assert s["engine"] == "llama.cpp" and s["parallel"] == 8 and s["ctx"] == 8192
    assert s["ctx_per_slot"] == 1024 and s["threads"] >= 1
    assert s["versions"]["xllamacpp"]
    with open(f"/proc/{engine.pid}/environ", "rb") as f:
        environ = f.read().split(b"\0")
    # The default wait policy: a bounded spin, then sleep (libgomp reads it at load).
    assert s["omp_wait_policy"] == "AUTO" and s["omp_spin_count"] == SPIN_COUNT
    assert f"GOMP_SPINCOUNT={SPIN_COUNT}".encode() in environ
    assert not [v for v in environ if v.startswith(b"OMP_WAIT_POLICY=")]
    assert s["versions"]["openmp"] == "libgomp"  # the runtime that reads GOMP_SPINCOUNT


def test_chat_non_streamed_with_usage(engine: Any) -> None:
    r = _client(engine).chat.completions.create(
        model=engine.model_name, messages=MESSAGES, max_tokens=8, temperature=0
    )
    assert r.model == engine.model_name
    assert r.choices[0].message.content
    assert r.choices[0].finish_reason in ("length", "stop")
    assert r.usage is not None
    assert r.usage.prompt_tokens > 5
    assert 1 <= r.usage.completion_tokens <= 8
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens


def test_chat_streamed_with_include_usage(engine: Any) -> None:
    stream = _client(engine).chat.completions.create(
        model=engine.model_name,
        messages=MESSAGES,
        max_tokens=12,
        stream=True,
        stream_options={"include_usage": True},
        extra_body={"ignore_eos": True},
    )
    text, content_chunks, usage, finish = "", 0, None, None
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for ch in chunk.choices:
            if ch.delta.content:
                text += ch.delta.content
                content_chunks += 1
            finish = ch.finish_reason or finish
    assert text and content_chunks >= 2
    assert finish == "length"
    assert usage is not None and usage.completion_tokens == 12 and usage.prompt_tokens > 5


def test_completions_streamed_and_not(engine: Any) -> None:
    c = _client(engine)
    r = c.completions.create(model=engine.model_name, prompt="The sky is", max_tokens=6)
    assert r.choices[0].text and r.usage is not None and r.usage.completion_tokens >= 1
    stream = c.completions.create(
        model=engine.model_name,
        prompt="Once upon a time",
        max_tokens=6,
        stream=True,
        stream_options={"include_usage": True},
        extra_body={"ignore_eos": True},
    )
    chunks = list(stream)
    text = "".join(ch.choices[0].text for ch in chunks if ch.choices)
    usage = [ch.usage for ch in chunks if ch.usage is not None]
    assert text
    assert usage and usage[-1].completion_tokens == 6


def test_models_lists_the_alias(engine: Any) -> None:
    ids = [m.id for m in _client(engine).models.list()]
    assert engine.model_name in ids


def test_health_and_metrics(engine: Any) -> None:
    status, body = _get(engine.base_url + "/health")
    assert status == 200 and json.loads(body)["status"] == "ok"
    # One request first, so the counters have something to count.
    _client(engine).chat.completions.create(
        model=engine.model_name, messages=MESSAGES, max_tokens=2
    )
    status, body = _get(engine.base_url + "/metrics")
    text = body.decode()
    assert status == 200
    assert "# TYPE llamacpp:prompt_tokens_total counter" in text
    values = {
        line.split()[0]: float(line.split()[1])
        for line in text.splitlines()
        if line.startswith("llamacpp:")
    }
    assert values["llamacpp:tokens_predicted_total"] >= 2
    assert "llamacpp:requests_processing" in values and "llamacpp:requests_deferred" in values


def test_tokenize_and_slots(engine: Any) -> None:
    out = _post(engine.base_url + "/tokenize", {"content": "Hello world, hello world"})
    tokens = out["tokens"]
    assert isinstance(tokens, list) and 3 <= len(tokens) <= 12
    assert all(isinstance(t, int) for t in tokens)
    status, body = _get(engine.base_url + "/slots")
    slots = json.loads(body)
    assert status == 200 and len(slots) == 8
    assert all(s["n_ctx"] == 1024 for s in slots)


def test_chunks_that_carry_several_tokens_are_counted_through_timings(engine: Any) -> None:
    """llama.cpp holds tokens back until their UTF-8 is whole (emoji, CJK), so one
    chunk may carry several: without its per-token timings the stream undercounts and
    the run would be flagged; with them every token is in its chunk."""

    prompt = [
        {"role": "user", "content": "Write a line with emoji and Chinese characters: 你好 🎉"}
    ]

    async def one(timings: bool) -> Any:
        async with Client(engine.base_url, timings_per_token=timings) as c:
            got = await c.chat(
                prompt, model=engine.model_name, max_tokens=40, temperature=0.0, ignore_eos=True
            )
        return got.record

    exact, plain = asyncio.run(one(True)), asyncio.run(one(False))
    assert exact.completion_tokens == plain.completion_tokens == 40
    assert sum(exact.chunk_tokens) == 40 and not exact.usage_mismatch
    assert max(exact.chunk_tokens) > 1 and len(exact.chunk_tokens) == len(plain.chunk_tokens)
    assert sum(plain.chunk_tokens) < 40 and plain.usage_mismatch
