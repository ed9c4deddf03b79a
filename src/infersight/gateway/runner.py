"""Run the gateway in the foreground (``infersight gateway``) until SIGINT/SIGTERM.

The upstreams are the config's; with none, the CLI layer starts the embedded engine
and adds it as one (``infersight.entrypoints.gateway``): the gateway never starts it.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
import sys
from collections.abc import Callable
from typing import Any

from infersight.core.errors import ConfigError
from infersight.gateway.access_log_writer import AccessLineHandler, flush_all, flush_periodically
from infersight.gateway.config import GatewayConfig
from infersight.gateway.server import Gateway

__all__ = ["serve"]

log = logging.getLogger("infersight.gateway")


def _setup_logging(access_log: bool) -> None:
    """Access log: one JSON line per request on stdout; warnings on stderr."""
    root = logging.getLogger("infersight.gateway")
    if not root.handlers:
        h = logging.StreamHandler(sys.stderr)
        h.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        root.addHandler(h)
        root.setLevel(logging.WARNING)
    acc = logging.getLogger("infersight.gateway.access")
    acc.propagate = False
    if access_log and not acc.handlers:
        acc.addHandler(AccessLineHandler())
        acc.setLevel(logging.INFO)


#: Young-generation threshold while serving (Python's default is 700): a request makes
#: hundreds of short-lived containers, freed by reference counting, that still count
#: towards the next collection.
GC_THRESHOLD = (7000, 10, 10)


def _tune_gc() -> None:
    """Keep the garbage collector off the hot path.

    At capacity, cyclic collections are mostly full collections walking the start-up
    heap (modules, the app, config) that never becomes garbage
    (``benchmarks/gateway_overhead.py --profile`` shows their share). That heap is
    moved out of the collector's sight (``gc.freeze``) once the gateway listens, and
    young collections run a tenth as often; reference cycles are still collected.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLD)


async def _serve_async(
    cfg: GatewayConfig, on_ready: Callable[[Gateway], Any], alive: Callable[[], bool] | None
) -> int | None:
    gw = Gateway(cfg)
    stop = asyncio.Event()
    received: list[int] = []
    loop = asyncio.get_running_loop()

    def on_signal(signum: int) -> None:
        received.append(signum)
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, on_signal, sig)
    flusher = asyncio.create_task(flush_periodically())
    try:
        async with gw.running():
            _tune_gc()
            on_ready(gw)
            while not stop.is_set() and (alive is None or alive()):
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), 0.5)
    finally:
        flusher.cancel()
        flush_all()
    return received[0] if received else None


def serve(
    cfg: GatewayConfig,
    on_ready: Callable[[Gateway], Any] | None = None,
    *,
    alive: Callable[[], bool] | None = None,
) -> int | None:
    """Serve until SIGINT/SIGTERM (returns the signal's number) or until ``alive()``
    turns false (returns None), with uvloop when available."""
    if not cfg.upstreams:
        raise ConfigError(
            "the gateway has no upstream: give one (the `infersight gateway` command "
            "starts the embedded engine when none is configured)"
        )
    _setup_logging(cfg.access_log)
    try:
        import uvloop

        runner: Any = uvloop.run
    except ImportError:  # pragma: no cover - uvloop is a dependency on Linux/macOS
        runner = asyncio.run
    result: int | None = runner(_serve_async(cfg, on_ready or (lambda gw: None), alive))
    return result
