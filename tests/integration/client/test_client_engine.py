"""infersight.client against the real embedded llama.cpp engine."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from infersight.client import Client, RetryPolicy, Timeouts
from infersight.core.records import RequestRecord

pytestmark = pytest.mark.engine

MSG = [{"role": "user", "content": "Count from one to ten."}]


def assert_ordered(rec: RequestRecord) -> None:
    assert rec.sent is not None and rec.headers is not None and rec.end is not None
    assert rec.scheduled <= rec.sent <= rec.headers <= rec.chunk_times[0] <= rec.end
    assert rec.chunk_times == sorted(rec.chunk_times) and rec.chunk_times[-1] <= rec.end


async def test_engine_streamed_chat(engine: Any) -> None:
    async with Client(
        engine.base_url, api_key=engine.api_key, timeouts=Timeouts(first_token=60, total=120)
    ) as c:
        done = await c.chat(
            MSG, model=engine.model_name, max_tokens=8, temperature=0, ignore_eos=True
        )
    rec = done.record
    assert rec.ok and rec.status == 200 and rec.attempts == 1 and rec.error is None
    assert rec.prompt_tokens is not None and rec.prompt_tokens > 5
    assert rec.completion_tokens == 8 and not rec.tokens_estimated
    assert done.usage is not None and done.usage["completion_tokens"] == 8
    assert rec.finish_reason == "length" and done.text.strip()
    assert len(rec.chunk_times) >= 4  # llama.cpp streams about one token per event
    assert_ordered(rec)
    assert rec.ttft is not None and rec.tpot is not None and rec.tpot > 0


async def test_engine_non_streamed_chat_and_extras(engine: Any) -> None:
    async with Client(engine.base_url, api_key=engine.api_key, timeouts=Timeouts(total=120)) as c:
        done = await c.chat(MSG, max_tokens=8, stream=False, temperature=0)
        comp = await c.complete("The capital of France is", max_tokens=4, temperature=0)
        models = await c.models()
        toks = await c.tokenize("hello world")
        warm = await c.warmup()
    rec = done.record
    assert rec.ok and len(rec.chunk_times) == 1 and done.text
    assert rec.prompt_tokens is not None and rec.completion_tokens is not None
    assert 1 <= rec.completion_tokens <= 8 and not rec.tokens_estimated
    assert_ordered(rec)
    assert comp.record.ok and comp.record.completion_tokens is not None
    assert engine.model_name in models
    assert toks is not None and len(toks) >= 2
    assert 0 < warm < 60


async def test_engine_closed_loop_streams_lose_no_request(engine: Any) -> None:
    # llama.cpp closes the connection after each streamed answer (announcing
    # keep-alive); a request written into such a connection is lost. Four users in a
    # closed loop, no retries: every request must succeed at its first attempt,
    # without a resend, because the client keeps those connections out of the pool.
    async with Client(
        engine.base_url,
        api_key=engine.api_key,
        retry=RetryPolicy.none(),
        timeouts=Timeouts(first_token=60, total=120),
    ) as c:

        async def user(u: int) -> list[RequestRecord]:
            out = []
            for i in range(6):
                done = await c.chat(
                    [{"role": "user", "content": f"Say {u}-{i}."}],
                    model=engine.model_name,
                    max_tokens=4,
                )
                out.append(done.record)
            return out

        runs = await asyncio.gather(*(user(u) for u in range(4)))
        why = c.closes_after_stream
    recs = [r for run in runs for r in run]
    assert len(recs) == 24 and all(r.ok and r.attempts == 1 for r in recs)
    assert sum(r.resends for r in recs) == 0
    assert why is not None and "llama.cpp" in why
