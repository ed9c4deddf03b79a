"""The streamed answer of the fake server, with mid-stream faults."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from aiohttp import web

from infersight_testkit.fake.config import Behavior, FakeConfig

__all__ = ["stream_answer"]


def _event(obj: Any) -> bytes:
    return b"data: " + orjson.dumps(obj) + b"\n\n"


async def stream_answer(
    request: web.Request,
    b: Behavior,
    cfg: FakeConfig,
    *,
    base: dict[str, Any],
    headers: dict[str, str],
    chat: bool,
    n: int,
    n_prompts: int,
    ttft: float,
    itl: float,
    finish: str,
    usage: dict[str, Any] | None,
    pace: Callable[[], float] = lambda: 1.0,
    usage_per_chunk: bool = False,
    step: Callable[[int], Awaitable[float]] | None = None,
    timings_per_token: bool = False,
) -> web.StreamResponse:
    """Write role chunk, n tokens per prompt in content chunks of
    ``cfg.tokens_per_chunk`` tokens, finish, usage, [DONE].

    ``pace()`` is how many times longer the next step takes than configured (a
    compute knee); each step's time is added when the step starts. ``step(tokens)``
    (on-demand KV) takes the step's tokens and may wait (a preemption): it returns the
    recompute time to add once the request runs again. With ``usage_per_chunk``
    (vLLM's ``continuous_usage_stats``) every content chunk also carries the usage so far;
    with ``timings_per_token`` (llama.cpp) its ``timings.predicted_n``.
    """
    resp = web.StreamResponse(status=200, headers=headers)
    await resp.prepare(request)
    start = time.monotonic()
    keep = b": keep-alive\n\n" if cfg.keepalive else b""
    if chat:
        role = {
            **base,
            "choices": [
                {"index": i, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}
                for i in range(n_prompts)
            ],
        }
        await resp.write(_event(role))
    per = max(1, cfg.tokens_per_chunk)
    text = cfg.token_text * per
    choices: list[dict[str, Any]]
    if chat:
        choices = [
            {"index": i, "delta": {"content": text}, "finish_reason": None}
            for i in range(n_prompts)
        ]
    else:
        choices = [
            {"index": i, "text": text, "finish_reason": None, "logprobs": None}
            for i in range(n_prompts)
        ]
    # Every content chunk is the same: encode it once so the server stays fast.
    chunk = keep + _event({**base, "choices": choices})
    step_end = start
    # ``per`` tokens a chunk: the first chunk after TTFT and the tokens it adds.
    for k in range(-(-n // per)):
        if step is not None:
            extra = await step(per * n_prompts)
            if extra:
                step_end = max(step_end, time.monotonic()) + extra
        step_end += (ttft + itl * (per - 1) if k == 0 else itl * per) * pace()
        target = step_end + (b.stall if b.stall and k == b.stall_at else 0.0)
        delay = target - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        if await _fault(request, resp, b, k):
            return resp
        if usage_per_chunk and usage is not None:
            so_far = {**usage, "completion_tokens": min(n, (k + 1) * per)}
            chunk = keep + _event({**base, "choices": choices, "usage": so_far})
        elif timings_per_token:
            timings = {"predicted_n": min(n, (k + 1) * per)}
            chunk = keep + _event({**base, "choices": choices, "timings": timings})
        await resp.write(chunk)
    fin_delta: dict[str, Any] = {}
    fin: list[dict[str, Any]] = [
        {"index": i, "delta": fin_delta, "finish_reason": finish}
        if chat
        else {"index": i, "text": "", "finish_reason": finish, "logprobs": None}
        for i in range(n_prompts)
    ]
    tail = _event({**base, "choices": fin})
    if usage is not None:
        tail += _event({**base, "choices": [], "usage": usage})
    await resp.write(tail + b"data: [DONE]\n\n")
    if cfg.hold_after_done:
        await asyncio.sleep(cfg.hold_after_done)
    await resp.write_eof()
    return resp


async def _fault(request: web.Request, resp: web.StreamResponse, b: Behavior, k: int) -> bool:
    """Inject the behaviour's mid-stream fault before chunk ``k``; True if it ended
    the answer."""
    if b.cut_after is not None and k >= b.cut_after:
        await resp.write_eof()
        return True
    if b.reset_after is not None and k >= b.reset_after:
        if request.transport is not None:
            request.transport.abort()
        return True
    if b.malformed_after is not None and k >= b.malformed_after:
        await resp.write(b'data: {"choices": [{"delta": {"content": "x"\n\n')
        await resp.write_eof()
        return True
    if b.error_after is not None and k >= b.error_after:
        err = {
            "error": {
                "message": b.message or "fake mid-stream failure",
                "type": "server_error",
                "code": b.status or 500,
            }
        }
        await resp.write(b"event: error\n" + _event(err))
        await resp.write_eof()
        return True
    return False
