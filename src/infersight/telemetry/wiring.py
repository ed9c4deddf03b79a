"""The one recorder factory: host, GPU and engine samplers wired into a Recorder.

``bench``, ``monitor``, the exporter and live sampling (``diagnose --url``) all build
their telemetry here, so a new sampler, or how a missing GPU is reported, changes in
one place.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infersight.telemetry.base import Sampler
from infersight.telemetry.gpu import GpuSampler
from infersight.telemetry.host import HostSampler
from infersight.telemetry.nvml import NvmlBackend
from infersight.telemetry.recorder import DEFAULT_CAPACITY, Recorder
from infersight.telemetry.scraper import EngineScraper

__all__ = ["Telemetry", "build_recorder"]

#: Seconds one scrape of an engine's /metrics may take (the exporter and monitor
#: take theirs from INFERSIGHT_TELEMETRY_SCRAPE_TIMEOUT).
_DEFAULT_SCRAPE_TIMEOUT = 2.0


@dataclass
class Telemetry:
    """A recorder and what was learnt while assembling it."""

    recorder: Recorder
    #: One per scraped /metrics URL, in the order given.
    scrapers: list[EngineScraper] = field(default_factory=list)
    #: The GPU sampler (None when GPUs were not asked for, or NVML failed to load).
    gpu: GpuSampler | None = None
    #: Static description of each GPU found (name, uuid, memory, driver).
    gpus: list[dict[str, Any]] = field(default_factory=list)
    #: Why there are no GPU metrics (one line), when GPUs were asked for.
    gpu_reason: str | None = None

    @property
    def gpu_note(self) -> str | None:
        """``no GPU metrics: <why>`` for a run's notes, or None."""
        return None if self.gpu_reason is None else f"no GPU metrics: {self.gpu_reason}"


def build_recorder(
    *,
    interval: float = 1.0,
    processes: Mapping[str, int] | None = None,
    children: bool = False,
    gpu: bool = True,
    gpu_backend: NvmlBackend | None = None,
    scrape: Iterable[str | EngineScraper] = (),
    api_key: str | None = None,
    slots: int | None = None,
    scrape_timeout: float | None = None,
    engine_buckets: bool = False,
    capacity: int = DEFAULT_CAPACITY,
    record: str | Path | None = None,
) -> Telemetry:
    """Host (and the named ``processes``), GPUs when ``gpu`` (through ``gpu_backend``,
    default: the real NVML), and an engine scraper per ``scrape`` URL (``api_key``,
    ``slots``, ``scrape_timeout`` and ``engine_buckets`` (keep the engines' histogram
    buckets, for the exporter) apply to the scrapers built here; a ready
    :class:`EngineScraper` is used as it is).

    Never fatal: a GPU that cannot be read leaves ``gpu_reason`` set instead.
    """
    samplers: list[Sampler] = [HostSampler(processes, children=children)]
    gpu_sampler, gpus, reason = _probe_gpus(gpu_backend) if gpu else (None, [], None)
    if gpu_sampler is not None:
        # Kept even without a GPU: it samples nothing then, and the exporter's /health
        # lists it with the reason.
        samplers.append(gpu_sampler)
    timeout = _DEFAULT_SCRAPE_TIMEOUT if scrape_timeout is None else scrape_timeout
    scrapers = [
        s
        if isinstance(s, EngineScraper)
        else EngineScraper(s, api_key=api_key, slots=slots, timeout=timeout, buckets=engine_buckets)
        for s in scrape
    ]
    samplers.extend(scrapers)
    rec = Recorder(samplers, interval=interval, capacity=capacity, record=record)
    return Telemetry(rec, scrapers, gpu_sampler, gpus, reason)


def _probe_gpus(
    backend: NvmlBackend | None,
) -> tuple[GpuSampler | None, list[dict[str, Any]], str | None]:
    """(sampler, described GPUs, why there are none)."""
    gpu_log = logging.getLogger("infersight.telemetry.gpu")
    level = gpu_log.level
    # No GPU is normal on a CPU box: the reason is returned for the caller to show once
    # (a run's notes, the monitor view), not logged on stderr.
    gpu_log.setLevel(logging.ERROR)
    try:
        sampler = GpuSampler(backend)
        gpus = sampler.describe()
    except Exception as e:  # pynvml fails in many shapes; telemetry is never fatal
        return None, [], str(e)
    finally:
        gpu_log.setLevel(level)
    if sampler.available and gpus:
        return sampler, gpus, None
    return sampler, gpus, sampler.unavailable_reason or "NVML found no GPU"
