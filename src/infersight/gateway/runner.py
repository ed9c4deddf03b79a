"""Run the gateway in the foreground (``infersight gateway``) until SIGINT/SIGTERM.

The upstreams are the config's; with none, the CLI layer starts the embedded engine
and adds it as one (``infersight.entrypoints.gateway``): the gateway never starts it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

from infersight.core.errors import ConfigError
from infersight.gateway.config import GatewayConfig
from infersight.gateway.server import Gateway

__all__ = ["serve"]

log = logging.getLogger("infersight.gateway")


class _ThrottledHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes each line at once but flushes the stream at most every ``interval`` s.

    A flush per line is a write syscall per request on the proxy's hot path; the
    serve loop calls :meth:`force_flush` periodically so no line waits long.
    """

    interval = 0.25

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._last = 0.0

    def flush(self) -> None:
        now = time.monotonic()
        if now - self._last >= self.interval:
            self._last = now
            super().flush()

    def force_flush(self) -> None:
        self._last = time.monotonic()
        super().flush()

    def close(self) -> None:
        self.force_flush()
        super().close()


async def _flush_periodically() -> None:
    acc = logging.getLogger("infersight.gateway.access")
    while True:
        await asyncio.sleep(_ThrottledHandler.interval)
        for h in acc.handlers:
            if isinstance(h, _ThrottledHandler):
                h.force_flush()


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
        h2 = _ThrottledHandler(sys.stdout)
        h2.setFormatter(logging.Formatter("%(message)s"))
        acc.addHandler(h2)
        acc.setLevel(logging.INFO)


async def _serve_async(cfg: GatewayConfig, on_ready: Callable[[Gateway], Any]) -> None:
    gw = Gateway(cfg)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    flusher = asyncio.create_task(_flush_periodically())
    try:
        async with gw.running():
            on_ready(gw)
            await stop.wait()
    finally:
        flusher.cancel()
        for h in logging.getLogger("infersight.gateway.access").handlers:
            h.flush() if not isinstance(h, _ThrottledHandler) else h.force_flush()


def serve(cfg: GatewayConfig, on_ready: Callable[[Gateway], Any] | None = None) -> None:
    """Serve until SIGINT/SIGTERM, with uvloop when available."""
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
    runner(_serve_async(cfg, on_ready or (lambda gw: None)))
