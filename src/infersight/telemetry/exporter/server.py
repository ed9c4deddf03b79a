"""The exporter's HTTP server: ``/metrics`` and ``/health`` (aiohttp, 127.0.0.1), and
:func:`run_exporter`, the loop behind ``infersight exporter``.

The recorder refreshes the samples in the background at its interval; a scrape only
renders the cached latest round, so it never waits on an engine.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from infersight.core.listen import listen_error
from infersight.telemetry.exporter.collector import TelemetryCollector
from infersight.telemetry.recorder import Recorder
from infersight.telemetry.wiring import Telemetry, build_recorder

__all__ = ["ExporterServer", "run_exporter"]

#: The exporter serves only the latest round: a small buffer is enough.
_EXPORTER_CAPACITY = 10_000


class ExporterServer:
    """Serves a :class:`Recorder`'s latest round as Prometheus metrics.

    ``registry`` defaults to a fresh ``CollectorRegistry`` (never the global one, so
    tests and several exporters in one process do not collide). ``gpus`` (static GPU
    descriptions, :attr:`Telemetry.gpus`) become ``infersight_gpu_info``.
    """

    def __init__(
        self,
        recorder: Recorder,
        *,
        host: str = "127.0.0.1",
        port: int = 9400,
        registry: CollectorRegistry | None = None,
        gpus: Sequence[dict[str, Any]] = (),
    ) -> None:
        self.recorder = recorder
        self.host = host
        self.port = port
        self.registry = registry or CollectorRegistry(auto_describe=False)
        self._last_round: float | None = None
        self.collector = TelemetryCollector(
            recorder.latest,
            rounds=lambda: recorder.rounds,
            last_round=lambda: self._last_round,
            gpus=gpus,
        )
        recorder.add_listener(self._on_round)
        self.registry.register(self.collector)
        self._runner: web.AppRunner | None = None

    def _on_round(self, samples: list[Any]) -> None:
        self._last_round = time.monotonic()
        self.collector.observe(samples)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def _metrics(self, _req: web.Request) -> web.Response:
        body = generate_latest(self.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _health(self, _req: web.Request) -> web.Response:
        age = None if self._last_round is None else time.monotonic() - self._last_round
        fresh = age is not None and age < 3 * self.recorder.interval + 1.0
        samplers = []
        for s in self.recorder.samplers:
            info: dict[str, Any] = {"name": s.name}
            err = getattr(s, "last_error", None) or getattr(s, "unavailable_reason", None)
            if err:
                info["error"] = err
            samplers.append(info)
        doc = {
            "status": "ok" if fresh else "stale",
            "rounds": self.recorder.rounds,
            "last_round_age_seconds": age,
            "interval_seconds": self.recorder.interval,
            "samplers": samplers,
        }
        return web.json_response(doc, status=200 if fresh else 503)

    async def start(self) -> None:
        """Start the recorder (first round now) and the HTTP server."""
        await self.recorder.start()
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/health", self._health)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        try:
            await site.start()
        except OSError as e:
            await self.stop()
            raise listen_error(self.host, self.port, e) from None
        if self.port == 0:
            self.port = int(self._runner.addresses[0][1])

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        await self.recorder.stop()


async def run_exporter(
    urls: Sequence[str],
    *,
    host: str = "127.0.0.1",
    port: int = 9400,
    interval: float = 1.0,
    processes: Mapping[str, int] | None = None,
    gpu: bool = True,
    api_key: str | None = None,
    scrape_timeout: float = 2.0,
    on_ready: Callable[[ExporterServer, Telemetry], None] | None = None,
) -> None:
    """Sample host, GPUs and the engines at ``urls``; serve them until SIGINT/SIGTERM.

    ``on_ready(server, telemetry)`` runs once the server listens (``server.url`` has
    the bound port; ``telemetry.gpu_reason`` says why there are no GPU metrics).
    """
    tel = build_recorder(
        interval=interval,
        processes=processes,
        gpu=gpu,
        scrape=urls,
        api_key=api_key,
        scrape_timeout=scrape_timeout,
        engine_buckets=True,
        capacity=_EXPORTER_CAPACITY,
    )
    srv = ExporterServer(tel.recorder, host=host, port=port, gpus=tel.gpus)
    await srv.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    try:
        if on_ready is not None:
            on_ready(srv, tel)
        await stop.wait()
    finally:
        await srv.stop()
