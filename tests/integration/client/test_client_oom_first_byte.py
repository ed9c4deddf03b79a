"""Engines' out-of-memory answers become one typed error; a non-streamed answer's
first byte (its head) is bound by the first-token limit and its body by the idle one.

Against the fault-injecting FakeOpenAI on 127.0.0.1, which answers each engine's real
OOM body (infersight_testkit.fake.faults, recorded from the engines' sources)."""

from __future__ import annotations

import pytest

from infersight.client import Client, RetryPolicy, Timeouts
from infersight.core import errors as E
from infersight_testkit import FakeConfig, FakeOpenAI
from infersight_testkit.fake.faults import OOM_ANSWERS
from support.waiting import until

MSG = [{"role": "user", "content": "hello world"}]
FAST = RetryPolicy(max_attempts=2, base_delay=0.01, max_delay=0.05)


@pytest.mark.parametrize("engine", sorted(OOM_ANSWERS))
async def test_each_engines_oom_answer_is_out_of_memory(engine: str) -> None:
    status, _ = OOM_ANSWERS[engine]
    fake = FakeConfig(script=[f"oom:{engine}", f"oom:{engine}"])
    async with FakeOpenAI(fake).running() as srv, Client(srv.base_url, retry=FAST) as c:
        with pytest.raises(E.OutOfMemory) as ei:
            await c.chat(MSG, max_tokens=4, stream=False)
    e = ei.value
    # One typed error whatever the engine's status (vLLM 400, TGI 424, others 500),
    # retried like a 503: memory frees as running requests finish.
    assert isinstance(e, E.ServerError) and e.kind == "OutOfMemory" and e.status == status
    assert e.retryable and srv.stats["requests"] == 2


async def test_oom_then_room_succeeds_on_the_retry() -> None:
    async with (
        FakeOpenAI(FakeConfig(tokens=3, script=["oom:llamacpp"])).running() as srv,
        Client(srv.base_url, retry=FAST) as c,
    ):
        done = await c.chat(MSG, max_tokens=3)
    assert done.record.ok and done.record.attempts == 2


async def test_a_plain_400_is_still_a_bad_request() -> None:
    body = {
        "error": {
            "message": "max_tokens must be at least 1",
            "type": "BadRequestError",
            "param": "max_tokens",
            "code": 400,
        }
    }
    fake = FakeConfig(script=[{"status": 400, "body": body}])
    async with FakeOpenAI(fake).running() as srv, Client(srv.base_url, retry=FAST) as c:
        with pytest.raises(E.BadRequest) as ei:
            await c.chat(MSG, max_tokens=4, stream=False)
    assert not isinstance(ei.value, E.OutOfMemory) and srv.stats["requests"] == 1


async def test_oom_in_a_stream_error_event_is_out_of_memory() -> None:
    fake = FakeConfig(
        tokens=8,
        script=[
            {
                "error_after": 2,
                "status": 500,
                "message": "CUDA out of memory. Tried to allocate 20.00 MiB",
            }
        ],
    )
    async with FakeOpenAI(fake).running() as srv, Client(srv.base_url, retry=FAST) as c:
        with pytest.raises(E.OutOfMemory):
            await c.chat(MSG, max_tokens=8)


@pytest.mark.parametrize(
    ("fault", "error"),
    [
        ("hang", E.FirstTokenTimeout),  # no head: the first-token limit (0.5 s)
        ("stall_body:20", E.IdleTimeout),  # head, half a body, then silence: the idle limit
    ],
)
async def test_non_streamed_silence_hits_a_limit(fault: str, error: type[E.Timeout]) -> None:
    t = Timeouts(first_token=0.5, idle=0.5, total=30)
    async with (
        FakeOpenAI(FakeConfig(script=[fault])).running() as srv,
        Client(srv.base_url, timeouts=t, retry=RetryPolicy(max_attempts=1)) as c,
    ):
        with pytest.raises(error) as ei:  # the limit's error, not the 30 s deadline's
            await c.chat(MSG, max_tokens=4, stream=False)
        # the client left while the server was still silent (its silence is 20 s or more)
        await until(lambda: srv.stats["client_gone"] == 1, "the server to see the client leave")
    rec = ei.value.record
    assert rec is not None and rec.attempts == 1 and srv.stats["requests"] == 1


async def test_non_streamed_slow_generation_within_the_limits_is_fine() -> None:
    # The head comes after 0.6 s of generation (under the 2 s limit); a body that
    # pauses 0.3 s stays under the 1 s idle limit.
    t = Timeouts(first_token=2, idle=1, total=30)
    fake = FakeConfig(ttft=0.3, itl=0.05, tokens=7, script=[{"body_stall": 0.3}])
    async with FakeOpenAI(fake).running() as srv, Client(srv.base_url, timeouts=t) as c:
        done = await c.chat(MSG, max_tokens=7, stream=False)
    assert done.record.ok and done.usage is not None
