"""Client behaviour on healthy answers: records, stream(), non-stream, extra endpoints."""

from __future__ import annotations

import time

import openai
import pytest

from infersight.client import Client, RetryPolicy, Timeouts
from infersight.core import errors as E
from infersight.core.records import RequestRecord
from infersight_testkit import FakeConfig, FakeOpenAI

MSG = [{"role": "user", "content": "one two three"}]


def assert_ordered(rec: RequestRecord) -> None:
    assert rec.sent is not None and rec.headers is not None and rec.end is not None
    assert rec.scheduled <= rec.sent <= rec.headers <= rec.chunk_times[0]
    assert rec.chunk_times == sorted(rec.chunk_times) and rec.chunk_times[-1] <= rec.end


async def test_streamed_record_and_headers() -> None:
    cfg = FakeConfig(ttft=0.1, itl=0.02, tokens=10, queue_delay_ms=12.5)
    async with FakeOpenAI(cfg).running() as srv, Client(srv.base_url, model="m1") as c:
        sched = time.monotonic()
        done = await c.chat(MSG, max_tokens=50, scheduled=sched, request_id="req-1")
    rec = done.record
    assert rec.ok and rec.error is None and rec.status == 200 and rec.attempts == 1
    assert rec.request_id == "req-1" and rec.server_request_id == "req-1"  # sent as X-Request-Id
    assert rec.queue_delay == pytest.approx(0.0125)
    assert rec.scheduled == sched and len(rec.chunk_times) == 10 and rec.chunk_tokens == [1] * 10
    assert rec.prompt_tokens == 3 and rec.completion_tokens == 10
    assert not rec.tokens_estimated and not rec.usage_mismatch
    assert rec.finish_reason == "stop" == done.finish_reason
    assert_ordered(rec)
    # The server's own 0.1 s TTFT and 0.02 s per token, measured: at least those, and
    # under 10x them (a client that adds seconds of its own is broken).
    assert rec.ttft is not None and 0.09 <= rec.ttft < 1.0, rec.ttft
    assert rec.tpot is not None and 0.01 <= rec.tpot < 0.2, rec.tpot
    assert done.text == "tok " * 10 and done.usage == {
        "prompt_tokens": 3,
        "completion_tokens": 10,
        "total_tokens": 13,
    }
    assert done.response is not None and done.response["model"] == "m1"
    assert done.response["choices"][0]["message"]["content"] == done.text


async def test_usage_absent_is_estimated_and_mismatch_flagged() -> None:
    async with (
        FakeOpenAI(FakeConfig(tokens=6, include_usage="never")).running() as srv,
        Client(srv.base_url) as c,
    ):
        rec = (await c.chat(MSG)).record
    assert rec.ok and rec.completion_tokens == 6 and rec.tokens_estimated
    assert rec.prompt_tokens is None
    async with (
        FakeOpenAI(FakeConfig(tokens=6, usage_offset=2)).running() as srv,
        Client(srv.base_url) as c,
    ):
        rec = (await c.chat(MSG)).record
    assert rec.ok and rec.completion_tokens == 8 and rec.usage_mismatch
    assert not rec.tokens_estimated


async def test_usage_per_chunk_counts_chunks_that_carry_several_tokens() -> None:
    # vLLM may carry several tokens in one chunk; with continuous_usage_stats each chunk
    # says how many, so the count is exact and no mismatch is flagged.
    cfg = FakeConfig(tokens=7, tokens_per_chunk=2)
    async with FakeOpenAI(cfg).running() as srv:
        async with Client(srv.base_url) as plain:
            rec = (await plain.chat(MSG)).record
        assert rec.chunk_tokens == [1, 1, 1, 1] and rec.usage_mismatch  # 4 chunks, 7 tokens
        async with Client(srv.base_url, usage_per_chunk=True) as c:
            rec = (await c.chat(MSG)).record
    assert rec.chunk_tokens == [2, 2, 2, 1] and rec.completion_tokens == 7
    assert not rec.usage_mismatch
    async with (
        FakeOpenAI(FakeConfig(tokens=6, tokens_per_chunk=2, usage_offset=2)).running() as srv,
        Client(srv.base_url, usage_per_chunk=True) as c,
    ):
        rec = (await c.chat(MSG)).record
    # Usage that disagrees with the chunks' own counts is still a mismatch.
    assert sum(rec.chunk_tokens) == 6 and rec.completion_tokens == 8 and rec.usage_mismatch


async def test_non_streamed() -> None:
    async with (
        FakeOpenAI(FakeConfig(ttft=0.05, tokens=7)).running() as srv,
        Client(srv.base_url) as c,
    ):
        done = await c.chat(MSG, stream=False)
        comp = await c.complete(["a b", "c"], max_tokens=3, stream=False)
    rec = done.record
    assert rec.ok and len(rec.chunk_times) == 1 and rec.chunk_tokens == [7]
    assert rec.completion_tokens == 7 and not rec.tokens_estimated and rec.finish_reason == "stop"
    assert_ordered(rec)
    assert done.text == "tok " * 7 and done.response is not None
    assert done.response["object"] == "chat.completion"
    assert comp.text == "tok " * 6 and comp.finish_reason == "length"
    assert comp.record.completion_tokens == 6


async def test_streamed_completions_and_keepalives() -> None:
    cfg = FakeConfig(tokens=5, keepalive=True)
    async with FakeOpenAI(cfg).running() as srv, Client(srv.base_url + "/v1") as c:
        done = await c.complete("x y", max_tokens=5)
    assert done.record.ok and done.text == "tok " * 5
    assert done.response is not None and done.response["choices"][0]["text"] == done.text


async def test_stream_context_enters_after_retries() -> None:
    cfg = FakeConfig(tokens=5, ttft=0.05, itl=0.1, script=["503"])
    async with (
        FakeOpenAI(cfg).running() as srv,
        Client(srv.base_url, retry=RetryPolicy(base_delay=0.01)) as c,
    ):
        body = {"messages": MSG, "stream": True}
        async with c.stream("/v1/chat/completions", body) as s:
            assert s.status == 200 and s.record.attempts == 2
            # entered at the first content, long before the last
            assert 1 <= len(s.record.chunk_times) < 5
            evs = [ev async for ev in s.events()]
    assert evs[0].json is not None and not evs[0].has_content  # replayed role chunk
    assert sum(e.has_content for e in evs) == 5 and evs[-1].done
    assert s.record.ok and s.record.completion_tokens == 5
    assert b"".join(e.raw for e in evs).endswith(b"data: [DONE]\n\n")


async def test_stream_errors_raise_from_iteration_without_retry() -> None:
    async with (
        FakeOpenAI(FakeConfig(tokens=20, script=["cut:4"])).running() as srv,
        Client(srv.base_url) as c,
    ):
        async with c.stream("/v1/chat/completions", {"messages": MSG, "stream": True}) as s:
            with pytest.raises(E.TruncatedStream):
                async for _ in s.events():
                    pass
        assert s.record.error == "TruncatedStream" and s.record.attempts == 1
        assert srv.stats["requests"] == 1


async def test_stream_left_early_is_cancelled() -> None:
    async with (
        FakeOpenAI(FakeConfig(tokens=100, itl=0.01)).running() as srv,
        Client(srv.base_url) as c,
    ):
        async with c.stream("/v1/chat/completions", {"messages": MSG, "stream": True}) as s:
            async for ev in s.events():
                if ev.has_content:
                    break
        assert s.record.cancelled and s.record.error == "Cancelled"
        # the pool still works after a dropped connection
        assert (await c.chat(MSG, max_tokens=3)).record.ok


async def test_connection_pool_limit() -> None:
    import asyncio

    cfg = FakeConfig(tokens=3, ttft=0.5)
    async with FakeOpenAI(cfg).running() as srv, Client(srv.base_url, max_connections=2) as c:
        recs = await asyncio.gather(*(c.chat(MSG) for _ in range(6)))
        assert all(r.record.ok for r in recs) and srv.stats["max_in_flight"] == 2
        # without a limit all six are in flight at once
        async with Client(srv.base_url) as c2:
            srv.reset_stats()
            await asyncio.gather(*(c2.chat(MSG) for _ in range(6)))
        assert srv.stats["max_in_flight"] == 6


async def test_models_tokenize_embeddings_warmup() -> None:
    async with (
        FakeOpenAI(FakeConfig(model="fake-7b", ttft=0.05)).running() as srv,
        Client(srv.base_url) as c,
    ):
        assert await c.models() == ["fake-7b"]
        toks = await c.tokenize("a b c d")
        assert toks is not None and len(toks) == 4
        emb = await c.request("/v1/embeddings", {"input": ["a", "b", "a"], "model": "e"})
        vecs = [d["embedding"] for d in emb.response["data"]]  # type: ignore[index]
        assert len(vecs) == 3 and vecs[0] == vecs[2] != vecs[1] and len(vecs[0]) == 16
        assert abs(sum(v * v for v in vecs[0]) - 1.0) < 1e-9
        assert emb.record.ok and srv.stats["embedding_batches"] == [3]
        latency = await c.warmup()
        assert 0.05 <= latency < 2.0
        with pytest.raises(E.BadRequest):
            await c.get_json("/nope")
    async with FakeOpenAI(FakeConfig(tokenize=False)).running() as srv, Client(srv.base_url) as c:
        assert await c.tokenize("a b") is None


async def test_max_concurrency_gives_429() -> None:
    import asyncio

    cfg = FakeConfig(tokens=2, ttft=1.0, max_concurrency=2)
    async with (
        FakeOpenAI(cfg).running() as srv,
        Client(srv.base_url, retry=RetryPolicy.none()) as c,
    ):
        res = await asyncio.gather(*(c.chat(MSG) for _ in range(5)), return_exceptions=True)
    limited = [r for r in res if isinstance(r, E.RateLimited)]
    assert len(limited) == 3 and all(r.retry_after == 1.0 for r in limited)
    assert srv.stats["statuses"] == {"200": 2, "429": 3}


def test_subprocess_server_and_script() -> None:
    import asyncio

    with FakeOpenAI.subprocess(FakeConfig(tokens=4)) as srv:
        assert srv.pid > 0 and srv.base_url.startswith("http://127.0.0.1:")
        srv.set_script(["503"])

        async def go() -> RequestRecord:
            async with Client(srv.base_url, retry=RetryPolicy(base_delay=0.01)) as c:
                return (await c.chat(MSG)).record

        rec = asyncio.run(go())
        stats = srv.stats()
    assert rec.ok and rec.attempts == 2 and rec.completion_tokens == 4
    assert stats["requests"] == 2 and stats["statuses"] == {"503": 1, "200": 1}


async def test_official_openai_client_against_fake() -> None:
    async with FakeOpenAI(FakeConfig(tokens=5)).running() as srv:
        oc = openai.AsyncOpenAI(base_url=srv.base_url + "/v1", api_key="none", max_retries=0)
        stream = await oc.chat.completions.create(
            model="fake", messages=MSG, stream=True, stream_options={"include_usage": True}
        )
        text, usage = "", None
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                text += chunk.choices[0].delta.content
            if chunk.usage:
                usage = chunk.usage
        full = await oc.chat.completions.create(model="fake", messages=MSG, max_tokens=3)
        emb = await oc.embeddings.create(model="fake", input=["x", "y"])
        await oc.close()
    assert text == "tok " * 5 and usage is not None and usage.completion_tokens == 5
    assert full.choices[0].message.content == "tok " * 3 and full.usage is not None
    assert len(emb.data) == 2


async def test_timeouts_object_defaults() -> None:
    t = Timeouts()
    assert t.connect == 10.0 and t.first_token is None and t.idle is None and t.total == 600.0
    with pytest.raises(E.ConfigError):
        Client("localhost:8000")


async def test_sse_without_event_stream_content_type() -> None:
    cfg = FakeConfig(tokens=4, sse_content_type="application/octet-stream")
    async with FakeOpenAI(cfg).running() as srv, Client(srv.base_url) as c:
        done = await c.chat(MSG)
    assert done.record.ok and len(done.record.chunk_times) == 4 and done.text == "tok " * 4


async def test_leaving_after_done_is_ok() -> None:
    async with FakeOpenAI(FakeConfig(tokens=3)).running() as srv, Client(srv.base_url) as c:
        async with c.stream("/v1/chat/completions", {"messages": MSG, "stream": True}) as s:
            async for ev in s.events():
                if ev.done:
                    break
        assert s.record.ok and not s.record.cancelled and s.record.completion_tokens == 3
        status, body = await c.get("/health")
        assert status == 200 and b"ok" in body


async def test_failed_record_attached_and_ordered() -> None:
    async with (
        FakeOpenAI(FakeConfig(tokens=10, itl=0.01, script=["cut:3"])).running() as srv,
        Client(srv.base_url) as c,
    ):
        with pytest.raises(E.TruncatedStream) as ei:
            await c.chat(MSG, request_id="r-9")
    rec = ei.value.record
    assert rec is not None
    assert rec.request_id == "r-9" and rec.status == 200 and not rec.ok
    assert rec.error_message == str(ei.value) and rec.end is not None
    assert rec.sent is not None and rec.headers is not None
    assert rec.scheduled <= rec.sent <= rec.headers <= rec.chunk_times[0] <= rec.end


async def test_server_holding_stream_after_done() -> None:
    # The server holds each stream open 30 s after [DONE]: waiting for it to close
    # would show as 30 s; not waiting, as milliseconds.
    async with (
        FakeOpenAI(FakeConfig(tokens=3, hold_after_done=30.0)).running() as srv,
        Client(srv.base_url) as c,
    ):
        done = await c.chat(MSG)
        # the answer came while the server still held its stream (in its handler, or
        # just left by the client): not after the 30 s hold ended
        assert srv.stats["in_flight"] + srv.stats["client_gone"] == 1
        async with c.stream("/v1/chat/completions", {"messages": MSG, "stream": True}) as s:
            n = sum([1 async for _ in s.events()])
    assert done.record.ok and done.record.end is not None
    assert s.record.ok and n == 7  # role, 3 content, finish, usage, [DONE]


async def test_timings_per_token_counts_what_llama_cpp_holds_back() -> None:
    # llama.cpp holds a token back until its UTF-8 is whole, so a chunk may carry
    # several; with timings_per_token every chunk (and the usage-only one) says how
    # many it has made so far.
    cfg = FakeConfig(tokens=7, tokens_per_chunk=2)
    async with (
        FakeOpenAI(cfg).running() as srv,
        Client(srv.base_url, timings_per_token=True) as c,
    ):
        rec = (await c.chat(MSG)).record
    assert rec.chunk_tokens == [2, 2, 2, 1] and rec.completion_tokens == 7
    assert not rec.usage_mismatch
    async with (
        FakeOpenAI(FakeConfig(tokens=6, tokens_per_chunk=2, usage_offset=2)).running() as srv,
        Client(srv.base_url, timings_per_token=True) as c,
    ):
        rec = (await c.chat(MSG)).record
    # a usage the server's own counts do not reach is still a mismatch
    assert sum(rec.chunk_tokens) == 6 and rec.completion_tokens == 8 and rec.usage_mismatch
