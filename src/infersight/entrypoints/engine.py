"""The embedded engine's lifecycle: the one place infersight starts it.

A command either talks to a server the user named (``--url``) or starts the embedded
engine for its own lifetime; :func:`endpoint` gives it a URL either way, plus what is
known about the server, as plain data (:class:`~infersight.core.endpoint.Endpoint`).
``bench``, ``batch`` and ``gateway`` only ever see that; ``serve`` keeps the engine
object itself (:func:`running_engine`) to watch it.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import signal
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from infersight.core.endpoint import Endpoint, EndpointOpener
from infersight.engine import EmbeddedEngine

__all__ = [
    "EngineOptions",
    "describe",
    "endpoint",
    "engine_opener",
    "internal_key",
    "new_engine",
    "running_engine",
]


@dataclass(frozen=True, slots=True)
class EngineOptions:
    """How to start the embedded engine (see :class:`~infersight.engine.EmbeddedEngine`)."""

    parallel: int = 8
    ctx: int | None = None
    model: str | Path | None = None
    threads: int | None = None
    host: str = "127.0.0.1"
    port: int = 0
    api_key: str | None = None
    verbose: bool = False


def internal_key() -> str:
    """A fresh random key for an engine that only infersight's gateway talks to (``serve``,
    ``gateway`` without upstreams): made per start, held in memory, never printed; any
    other local user reaching its loopback port is refused."""
    return secrets.token_urlsafe(32)


def new_engine(opts: EngineOptions) -> EmbeddedEngine:
    """The engine, configured (its settings are checked) but not started."""
    return EmbeddedEngine(
        model=opts.model,
        parallel=opts.parallel,
        ctx=opts.ctx,
        threads=opts.threads,
        host=opts.host,
        port=opts.port,
        api_key=opts.api_key,
        verbose=opts.verbose,
    )


@contextlib.contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """During start-up SIGTERM interrupts the wait like Ctrl-C does, so the engine
    process is stopped on the way out instead of being left behind."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def running_engine(engine: EmbeddedEngine) -> Iterator[EmbeddedEngine]:
    """``engine`` (from :func:`new_engine`) started for the ``with`` block and stopped
    after it. Ctrl-C or SIGTERM while it starts stops it and raises KeyboardInterrupt."""
    with _sigterm_interrupts():
        engine.start()
    try:
        yield engine
    finally:
        engine.stop()


def describe(engine: EmbeddedEngine, started_by: str) -> Endpoint:
    """What the commands below the CLI may know about a running engine."""
    return Endpoint(
        url=engine.base_url,
        api_key=engine.api_key,
        started_by=started_by,
        pid=engine.pid,
        slots=engine.config.parallel,
        model=engine.model_name,
        settings=engine.settings,
    )


@contextlib.contextmanager
def endpoint(
    url: str | None,
    opts: EngineOptions,
    *,
    command: str,
    on_start: Callable[[], object] | None = None,
) -> Iterator[Endpoint]:
    """A URL for this command: the given ``url``, or the embedded engine started with
    ``opts`` for the command's lifetime (``on_start`` runs just before it starts, e.g.
    to say so)."""
    if url is not None:
        yield Endpoint.given(url)
        return
    engine = new_engine(opts)
    if on_start is not None:
        on_start()
    with running_engine(engine) as eng:
        yield describe(eng, command)


def engine_opener(
    opts: EngineOptions, *, command: str, on_start: Callable[[], object] | None = None
) -> EndpointOpener:
    """For async commands that start the engine only once they know they have work:
    each call opens the embedded engine (started in a worker thread, so the event loop
    keeps running) and closes it after the ``async with`` block."""

    @contextlib.asynccontextmanager
    async def open_engine() -> AsyncIterator[Endpoint]:
        engine = new_engine(opts)
        if on_start is not None:
            on_start()
        await asyncio.to_thread(engine.start)
        try:
            yield describe(engine, command)
        finally:
            await asyncio.to_thread(engine.stop)

    return open_engine
