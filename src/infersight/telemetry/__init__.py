"""infersight.telemetry: GPU (NVML), host (psutil) and engine (/metrics) samplers,
one normalised stream of :class:`~infersight.core.records.Sample`, and a recorder.

Sample names are listed in ``.notes/contracts.md`` section 3 and in
:mod:`infersight.telemetry.engines` (engine histograms, raw metrics).

>>> rec = Recorder([HostSampler(processes={"engine": pid}),
...                 EngineScraper("http://127.0.0.1:8000/metrics")], interval=1.0)
>>> async with rec: ...
>>> rec.samples()
"""

from infersight.telemetry.base import Sampler
from infersight.telemetry.engines import Normalizer, detect_engine, engine_specs
from infersight.telemetry.exporter import TelemetryCollector, exported_name, render
from infersight.telemetry.exporter_server import ExporterServer
from infersight.telemetry.gpu import GpuSampler, throttle_reason_names
from infersight.telemetry.host import HostSampler
from infersight.telemetry.nvml import (
    NvmlBackend,
    NvmlFieldError,
    NvmlUnavailable,
    PynvmlBackend,
    ReplayBackend,
)
from infersight.telemetry.promtext import histogram_quantile, parse_metrics
from infersight.telemetry.recorder import Recorder, read_samples
from infersight.telemetry.scraper import EngineScraper, metrics_url

__all__ = [
    "EngineScraper",
    "ExporterServer",
    "GpuSampler",
    "HostSampler",
    "Normalizer",
    "NvmlBackend",
    "NvmlFieldError",
    "NvmlUnavailable",
    "PynvmlBackend",
    "Recorder",
    "ReplayBackend",
    "Sampler",
    "TelemetryCollector",
    "detect_engine",
    "engine_specs",
    "exported_name",
    "histogram_quantile",
    "metrics_url",
    "parse_metrics",
    "read_samples",
    "render",
    "throttle_reason_names",
]
