"""Samples taken during a bench run: host and processes every second (psutil), GPUs
(NVML, when present) and the server's Prometheus metrics (``--scrape URL``, and the
target's own ``/metrics`` by default), through telemetry's one recorder factory.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from infersight.bench.config import BenchConfig
from infersight.bench.target import Target
from infersight.core.records import Sample

__all__ = ["BenchTelemetry"]

log = logging.getLogger(__name__)


class BenchTelemetry:
    """Starts a :class:`~infersight.telemetry.Recorder` for the run; never fatal."""

    def __init__(self, cfg: BenchConfig, target: Target) -> None:
        self.cfg = cfg
        self.target = target
        self._rec: Any = None
        self.notes: list[str] = []
        self.gpus: list[dict[str, Any]] = []
        self.gpu_note: str | None = None

    async def start(self) -> None:
        from infersight.telemetry import build_recorder

        procs = {"loadgen": os.getpid()}
        if self.target.engine_pid is not None:
            procs["engine"] = self.target.engine_pid
        urls = list(self.cfg.scrape)
        if self.target.metrics_url and self.target.metrics_url not in urls:
            urls.append(self.target.metrics_url)
        # Descendants (the --workers processes) are found by walking every process of
        # the host, milliseconds that would stall this event loop each second: only
        # when there are workers, whose loops this does not stall.
        tel = build_recorder(
            interval=self.cfg.sample_interval, processes=procs,
            children=self.cfg.workers > 1, scrape=urls,
            api_key=self.target.api_key, slots=self.target.slots,
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
