"""Event loop and client construction shared by the runner and worker processes (a
worker is handed a :class:`ClientSpec` and builds its own client from it)."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

from infersight.client import Client, RetryPolicy, Timeouts

__all__ = ["ClientSpec", "make_client", "run_coroutine"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ClientSpec:
    """How a worker builds its own client (nothing unpicklable crosses processes)."""

    base_url: str
    api_key: str | None
    api_key_source: str | None = None
    connect_timeout: float = 10.0
    #: Connection cap (0 = none): requests beyond it wait in the client's pool.
    max_connections: int = 0
    #: Ask for the usage in every streamed chunk (vLLM): exact tokens per chunk.
    usage_per_chunk: bool = False
    #: Ask for the tokens so far in every streamed chunk (llama.cpp), likewise.
    timings_per_token: bool = False


def run_coroutine(coro: Coroutine[Any, Any, T]) -> T:
    """Run on uvloop when available: its timers and sockets cost less CPU per chunk."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency off Windows
        return asyncio.run(coro)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(coro)


def make_client(spec: ClientSpec) -> Client:
    """A client for measuring: no retries (a retry would hide the error it answers)."""
    return Client(
        spec.base_url,
        api_key=spec.api_key,
        timeouts=Timeouts(connect=spec.connect_timeout, total=None),
        retry=RetryPolicy.none(),
        api_key_source=spec.api_key_source,
        max_connections=spec.max_connections,
        usage_per_chunk=spec.usage_per_chunk,
        timings_per_token=spec.timings_per_token,
    )
