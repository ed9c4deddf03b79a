"""The one choke point between infersight and NVML.

Everything the GPU sampler reads goes through an :class:`NvmlBackend`:

- :class:`PynvmlBackend` calls ``pynvml`` (package ``nvidia-ml-py``) on a real driver;
- :class:`ReplayBackend` replays recorded readings from a JSON fixture, so tests run
  the same sampler code without a GPU.

A backend raises :class:`NvmlUnavailable` from :meth:`~NvmlBackend.init` when there is
no usable driver and :class:`NvmlFieldError` from :meth:`~NvmlBackend.call` when one
field cannot be read (not supported, no permission, GPU lost...). Values keep NVML's
units (mW, KB/s, bytes, MHz, percent); the sampler converts them.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Protocol

__all__ = [
    "NvmlBackend",
    "NvmlFieldError",
    "NvmlUnavailable",
    "PynvmlBackend",
    "ReplayBackend",
]

#: GPM metric ids (nvml.h): percentage of SMs busy, and of warps resident.
GPM_SM_UTIL = 2
GPM_SM_OCCUPANCY = 3


class NvmlUnavailable(Exception):
    """NVML cannot be used at all (no driver, no library, no permission)."""


class NvmlFieldError(Exception):
    """One NVML call failed; the field reads as not available."""


class NvmlBackend(Protocol):
    def init(self) -> None:
        """Open NVML; raises NvmlUnavailable with a one-line reason."""
        ...

    def shutdown(self) -> None: ...

    def tick(self) -> None:
        """Called at the start of each sampling round (the replay moves on a round)."""
        ...

    def call(self, fn: str, *args: Any) -> Any:
        """Call the NVML function named ``fn`` (pynvml spelling); NvmlFieldError on
        any NVML error."""
        ...

    def gpm_metrics(self, sample1: Any, sample2: Any, metric_ids: list[int]) -> dict[int, float]:
        """GPM metrics between two samples taken with nvmlGpmSampleGet; ids whose
        value NVML could not compute are left out."""
        ...


class PynvmlBackend:
    """NVML through ``pynvml`` (imported lazily so that importing infersight never
    needs the driver)."""

    def __init__(self) -> None:
        self._nvml: Any = None

    def init(self) -> None:
        try:
            # Imported here: nvidia-ml-py is optional (no GPU, no package); its absence
            # is this backend's NvmlUnavailable, not an import error of the module.
            import pynvml
        except ImportError:
            raise NvmlUnavailable(
                "nvidia-ml-py is not installed (pip install nvidia-ml-py)"
            ) from None
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as e:
            raise NvmlUnavailable(
                f"NVIDIA driver not available ({e}); GPU metrics are off"
            ) from None
        self._nvml = pynvml

    def shutdown(self) -> None:
        if self._nvml is not None:
            with contextlib.suppress(self._nvml.NVMLError):
                self._nvml.nvmlShutdown()
            self._nvml = None

    def tick(self) -> None:
        return None

    def call(self, fn: str, *args: Any) -> Any:
        nv = self._nvml
        if nv is None:
            raise NvmlFieldError("NVML is not initialised")
        f = getattr(nv, fn, None)
        if f is None:
            raise NvmlFieldError(f"{fn} is not in this nvidia-ml-py")
        try:
            return f(*args)
        except nv.NVMLError as e:
            raise NvmlFieldError(f"{fn}: {e}") from None

    def gpm_metrics(self, sample1: Any, sample2: Any, metric_ids: list[int]) -> dict[int, float]:
        nv = self._nvml
        if nv is None:
            raise NvmlFieldError("NVML is not initialised")
        mg = nv.c_nvmlGpmMetricsGet_t()
        mg.version = nv.NVML_GPM_METRICS_GET_VERSION
        mg.numMetrics = len(metric_ids)
        mg.sample1 = sample1
        mg.sample2 = sample2
        for i, mid in enumerate(metric_ids):
            mg.metrics[i].metricId = mid
        try:
            nv.nvmlGpmMetricsGet(mg)
        except nv.NVMLError as e:
            raise NvmlFieldError(f"nvmlGpmMetricsGet: {e}") from None
        return {
            int(mg.metrics[i].metricId): float(mg.metrics[i].value)
            for i in range(len(metric_ids))
            if mg.metrics[i].nvmlReturn == 0
        }


def _ns(v: Any) -> Any:
    """JSON -> attribute objects like pynvml's structs (lists stay lists)."""
    if isinstance(v, dict):
        return SimpleNamespace(**{k: _ns(x) for k, x in v.items()})
    if isinstance(v, list):
        return [_ns(x) for x in v]
    return v


class ReplayBackend:
    """Replays NVML readings recorded in a JSON fixture, round by round (cycling).

    Fixture layout: ``{"available": true, "devices": [{"static": {fn: value},
    "rounds": [{fn: value}, ...]}]}``. A function taking an extra argument (clock
    type, sensor, PCIe counter) stores ``{"<arg>": value}``; ``{"error": "..."}``
    replays an NVML error; ``"gpm"`` holds ``{"<metric id>": percent}`` per round.
    """

    def __init__(self, fixture: str | Path | dict[str, Any]) -> None:
        if isinstance(fixture, dict):
            self.doc = fixture
        else:
            self.doc = json.loads(Path(fixture).read_text())
        self.devices: list[dict[str, Any]] = list(self.doc.get("devices", []))
        self.round = -1
        self.calls: list[str] = []

    def init(self) -> None:
        if not self.doc.get("available", True):
            raise NvmlUnavailable(str(self.doc.get("reason", "NVIDIA driver not available")))

    def shutdown(self) -> None:
        return None

    def tick(self) -> None:
        self.round += 1

    def _device(self, h: Any) -> dict[str, Any]:
        return self.devices[int(h)]

    def _lookup(self, dev: dict[str, Any], fn: str) -> Any:
        rounds = dev.get("rounds") or [{}]
        current = rounds[max(self.round, 0) % len(rounds)]
        if fn in current:
            return current[fn]
        if fn in dev.get("static", {}):
            return dev["static"][fn]
        raise NvmlFieldError(f"{fn}: NVML_ERROR_NOT_SUPPORTED (not recorded)")

    def call(self, fn: str, *args: Any) -> Any:
        self.calls.append(fn)
        if fn == "nvmlDeviceGetCount":
            return len(self.devices)
        if fn == "nvmlSystemGetDriverVersion":
            return self.doc.get("driver_version", "")
        if fn == "nvmlDeviceGetHandleByIndex":
            if not 0 <= int(args[0]) < len(self.devices):
                raise NvmlFieldError("nvmlDeviceGetHandleByIndex: NVML_ERROR_INVALID_ARGUMENT")
            return int(args[0])
        if fn == "nvmlGpmSampleAlloc":
            return SimpleNamespace(device=None, round=None)
        if fn == "nvmlGpmSampleFree":
            return None
        dev = self._device(args[0])
        if fn == "nvmlGpmSampleGet":
            gpm = self._lookup(dev, "gpm")
            if isinstance(gpm, dict) and "error" in gpm:
                raise NvmlFieldError(f"{fn}: {gpm['error']}")
            args[1].device, args[1].round = int(args[0]), self.round
            return args[1]
        v = self._lookup(dev, fn)
        if len(args) > 1 and isinstance(v, dict) and "error" not in v:
            key = str(args[1])
            if key not in v:
                raise NvmlFieldError(f"{fn}({key}): NVML_ERROR_NOT_SUPPORTED")
            v = v[key]
        if isinstance(v, dict) and set(v) == {"error"}:
            raise NvmlFieldError(f"{fn}: {v['error']}")
        return _ns(v)

    def gpm_metrics(self, sample1: Any, sample2: Any, metric_ids: list[int]) -> dict[int, float]:
        dev = self._device(sample2.device)
        gpm = self._lookup(dev, "gpm")
        return {m: float(gpm[str(m)]) for m in metric_ids if str(m) in gpm}
