"""Samples taken during a bench run: host and processes every second (psutil: the load
generator, and the engine's process when bench started it or it serves on this
machine's loopback, the process that computes, not a front), GPUs
(NVML, when present) and the server's Prometheus metrics (``--scrape URL``, and the
target's own ``/metrics`` by default), through telemetry's one recorder factory.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from infersight.bench.target import Target
from infersight.core.records import Sample
from infersight.flags.bench import TelemetrySection
from infersight.telemetry import build_recorder
from infersight.telemetry.server_process import computing_pid, listening_pid

__all__ = ["BenchTelemetry"]

log = logging.getLogger(__name__)


def _local_server(url: str) -> int | None:
    """The process that computes for a server on this machine's loopback (for
    ``infersight serve``, its llama.cpp child, not the front), unless it is this one."""
    pid = listening_pid(url)
    return None if pid is None or pid == os.getpid() else computing_pid(pid)


class BenchTelemetry:
    """Starts a :class:`~infersight.telemetry.Recorder` for the run; never fatal."""

    def __init__(self, cfg: TelemetrySection, target: Target, *, workers: int = 1) -> None:
        self.cfg = cfg
        self.workers = workers
        self.target = target
        self._rec: Any = None
        self.notes: list[str] = []
        self.gpus: list[dict[str, Any]] = []
        self.gpu_note: str | None = None

    async def start(self) -> None:
        procs = {"loadgen": os.getpid()}
        engine = self.target.engine_pid
        if engine is None:
            engine = _local_server(self.target.base_url)
        if engine is not None:
            procs["engine"] = engine
        urls = list(self.cfg.scrape)
        if self.target.metrics_url and self.target.metrics_url not in urls:
            urls.append(self.target.metrics_url)
        # Descendants (the --workers processes) are found by walking every process of
        # the host, milliseconds that would stall this event loop each second: only
        # when there are workers, whose loops this does not stall.
        tel = build_recorder(
            interval=self.cfg.sample_interval,
            processes=procs,
            children=self.workers > 1,
            scrape=urls,
            api_key=self.target.api_key,
            slots=self.target.slots,
        )
        self.gpus, self.gpu_note = tel.gpus, tel.gpu_note
        self._rec = tel.recorder
        await self._rec.start()

    async def stop(self) -> list[Sample]:
        if self._rec is None:
            return []
        try:
            await self._rec.stop()
        except Exception as e:
            log.warning("telemetry stop failed: %s", e)
        samples: list[Sample] = self._rec.samples()
        return samples
