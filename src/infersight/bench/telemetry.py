"""Samples taken during a bench run: host and processes every second (psutil), GPUs
(NVML, when present) and the server's Prometheus metrics (``--scrape URL``, and the
embedded engine's own ``/metrics`` automatically). All wiring to
:mod:`infersight.telemetry` is here, in one place.
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
        from infersight.telemetry import EngineScraper, GpuSampler, HostSampler, Recorder

        procs = {"loadgen": os.getpid()}
        if self.target.engine_pid is not None:
            procs["engine"] = self.target.engine_pid
        samplers: list[Any] = [HostSampler(processes=procs, children=True)]
        gpu_log = logging.getLogger("infersight.telemetry.gpu")
        level = gpu_log.level
        # No GPU is normal for a CPU engine: say so once in the result, not on stderr.
        gpu_log.setLevel(logging.ERROR)
        try:
            gpu = GpuSampler()
            self.gpus = gpu.describe()
            if gpu.available and self.gpus:
                samplers.append(gpu)
            else:
                self.gpu_note = f"no GPU metrics: {gpu.unavailable_reason}"
        except Exception as e:
            self.gpu_note = f"no GPU metrics: {e}"
        finally:
            gpu_log.setLevel(level)
        urls = list(self.cfg.scrape)
        if self.target.metrics_url and self.target.metrics_url not in urls:
            urls.append(self.target.metrics_url)
        for url in urls:
            samplers.append(
                EngineScraper(url, api_key=self.target.api_key, slots=self.target.slots)
            )
        self._rec = Recorder(samplers, interval=self.cfg.sample_interval)
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
