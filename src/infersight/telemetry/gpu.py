"""GPU sampler over NVML (through the :mod:`.nvml` choke point).

Per device (label ``gpu`` = index): utilisation (0..1), SM activity (0..1, NVML GPM
"SM util", Hopper and newer), SM occupancy (0..1, GPM), memory used/total (bytes),
power and its enforced limit (W), SM and memory clocks (MHz), temperature (°C), PCIe
rx/tx (bytes/s), the clock-event ("throttle") reason bitmask, and memory per process
(``gpu.process_memory_bytes`` with label ``pid``). Every field that NVML cannot read
is a sample with value None. Without a driver the sampler logs one message and yields
nothing.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from infersight.core.records import Sample
from infersight.telemetry.nvml import (
    GPM_SM_OCCUPANCY,
    GPM_SM_UTIL,
    NvmlBackend,
    NvmlFieldError,
    NvmlUnavailable,
    PynvmlBackend,
)

__all__ = ["THROTTLE_REASONS", "GpuSampler", "throttle_reason_names"]

log = logging.getLogger(__name__)

# nvml.h constants (kept here so replay works without pynvml's values).
_CLOCK_SM, _CLOCK_MEM = 1, 2
_TEMP_GPU = 0
_PCIE_TX, _PCIE_RX = 0, 1

#: nvmlClocksEventReason bits -> short names.
THROTTLE_REASONS: dict[int, str] = {
    0x1: "gpu_idle",
    0x2: "app_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal",
    0x40: "hw_thermal",
    0x80: "hw_power_brake",
    0x100: "display_clocks",
}


def throttle_reason_names(mask: float | int | None) -> list[str]:
    """Decode a clock-event bitmask into names (empty for 0 or None)."""
    if mask is None:
        return []
    m = int(mask)
    return [name for bit, name in THROTTLE_REASONS.items() if m & bit]


class GpuSampler:
    """NVML readings of every GPU each round. ``backend`` defaults to real NVML."""

    name = "gpu"

    def __init__(self, backend: NvmlBackend | None = None, *, gpm: bool = True) -> None:
        self.backend: NvmlBackend = backend or PynvmlBackend()
        self.use_gpm = gpm
        self.available = False
        #: Why there are no GPU metrics (one line), or None when NVML works.
        self.unavailable_reason: str | None = None
        self._handles: list[Any] = []
        self._gpm_prev: dict[int, Any] = {}
        self._gpm_spare: dict[int, Any] = {}
        self._gpm_ok: dict[int, bool] = {}
        self._started = False

    # -- setup --------------------------------------------------------------------
    def _start(self) -> None:
        self._started = True
        try:
            self.backend.init()
            n = int(self.backend.call("nvmlDeviceGetCount"))
            self._handles = [self.backend.call("nvmlDeviceGetHandleByIndex", i) for i in range(n)]
        except (NvmlUnavailable, NvmlFieldError) as e:
            self.unavailable_reason = str(e)
            log.warning("GPU metrics unavailable: %s", e)
            return
        self.available = True
        if not self._handles:
            self.unavailable_reason = "NVML found no GPU"
            log.warning("GPU metrics unavailable: NVML found no GPU")

    def _field(self, fn: str, *args: Any) -> Any:
        """One NVML read; None when it fails (the field is not available)."""
        try:
            return self.backend.call(fn, *args)
        except NvmlFieldError as e:
            log.debug("%s", e)
            return None

    def describe(self) -> list[dict[str, Any]]:
        """Static description of each GPU (name, uuid, memory, power limit, driver)."""
        if not self._started:
            self._start()
        driver = self._field("nvmlSystemGetDriverVersion")
        out = []
        for i, h in enumerate(self._handles):
            mem = self._field("nvmlDeviceGetMemoryInfo", h)
            out.append(
                {
                    "index": i,
                    "name": self._field("nvmlDeviceGetName", h),
                    "uuid": self._field("nvmlDeviceGetUUID", h),
                    "memory_total_bytes": getattr(mem, "total", None),
                    "driver_version": driver,
                }
            )
        return out

    # -- sampling -----------------------------------------------------------------
    def sample_sync(self) -> list[Sample]:
        if not self._started:
            self._start()
        if not self.available:
            return []
        self.backend.tick()
        t = time.monotonic()
        out: list[Sample] = []
        for i, h in enumerate(self._handles):
            out.extend(self._device_samples(i, h, t))
        return out

    async def sample(self) -> list[Sample]:
        if self._started and not self._handles:
            # No GPU (or no driver): nothing to read, so no thread hop that a load
            # generator's event loop would pay for every round.
            return []
        # NVML calls block (some take milliseconds); keep them off the event loop.
        return await asyncio.to_thread(self.sample_sync)

    def _device_samples(self, i: int, h: Any, t: float) -> list[Sample]:
        lab = {"gpu": str(i)}
        out: list[Sample] = []

        def add(name: str, value: float | None, labels: dict[str, str] | None = None) -> None:
            out.append(
                Sample(t, name, None if value is None else float(value), labels or dict(lab))
            )

        util = self._field("nvmlDeviceGetUtilizationRates", h)
        add("gpu.utilization", None if util is None else util.gpu / 100.0)
        sm_util, sm_occ = self._gpm(i, h)
        add("gpu.sm_activity", None if sm_util is None else sm_util / 100.0)
        add("gpu.sm_occupancy", None if sm_occ is None else sm_occ / 100.0)
        mem = self._field("nvmlDeviceGetMemoryInfo", h)
        add("gpu.memory_used_bytes", getattr(mem, "used", None))
        add("gpu.memory_total_bytes", getattr(mem, "total", None))
        power = self._field("nvmlDeviceGetPowerUsage", h)  # mW
        add("gpu.power_watts", None if power is None else power / 1000.0)
        limit = self._field("nvmlDeviceGetEnforcedPowerLimit", h)  # mW
        add("gpu.power_limit_watts", None if limit is None else limit / 1000.0)
        add("gpu.sm_clock_mhz", self._field("nvmlDeviceGetClockInfo", h, _CLOCK_SM))
        add("gpu.mem_clock_mhz", self._field("nvmlDeviceGetClockInfo", h, _CLOCK_MEM))
        add("gpu.temperature_c", self._field("nvmlDeviceGetTemperature", h, _TEMP_GPU))
        rx = self._field("nvmlDeviceGetPcieThroughput", h, _PCIE_RX)  # KB/s
        tx = self._field("nvmlDeviceGetPcieThroughput", h, _PCIE_TX)
        add("gpu.pcie_rx_bytes_per_s", None if rx is None else rx * 1024.0)
        add("gpu.pcie_tx_bytes_per_s", None if tx is None else tx * 1024.0)
        reasons = self._field("nvmlDeviceGetCurrentClocksEventReasons", h)
        if reasons is None:  # drivers before r535 only have the old name
            reasons = self._field("nvmlDeviceGetCurrentClocksThrottleReasons", h)
        add("gpu.throttle_reasons", reasons)
        procs = self._field("nvmlDeviceGetComputeRunningProcesses", h) or []
        for p in procs:
            used = getattr(p, "usedGpuMemory", None)
            pid = getattr(p, "pid", None)
            if pid is None:
                continue
            add("gpu.process_memory_bytes", used, {**lab, "pid": str(pid)})
        return out

    def _gpm(self, i: int, h: Any) -> tuple[float | None, float | None]:
        """SM util and occupancy (percent) between this round and the previous one."""
        if not self.use_gpm or self._gpm_ok.get(i) is False:
            return None, None
        if i not in self._gpm_ok:
            support = self._field("nvmlGpmQueryDeviceSupport", h)
            ok = bool(getattr(support, "isSupportedDevice", 0))
            self._gpm_ok[i] = ok
            if not ok:
                return None, None
            self._gpm_spare[i] = self._field("nvmlGpmSampleAlloc")
            self._gpm_prev[i] = self._field("nvmlGpmSampleAlloc")
            if self._gpm_prev[i] is None or self._gpm_spare[i] is None:
                self._gpm_ok[i] = False
                return None, None
            if self._field("nvmlGpmSampleGet", h, self._gpm_prev[i]) is None:
                self._gpm_ok[i] = False
            return None, None  # the first reading needs a second sample
        cur = self._gpm_spare[i]
        if self._field("nvmlGpmSampleGet", h, cur) is None:
            return None, None
        try:
            vals = self.backend.gpm_metrics(self._gpm_prev[i], cur, [GPM_SM_UTIL, GPM_SM_OCCUPANCY])
        except NvmlFieldError as e:
            log.debug("%s", e)
            vals = {}
        # Swap buffers: the current sample is the next round's baseline.
        self._gpm_spare[i], self._gpm_prev[i] = self._gpm_prev[i], cur
        return vals.get(GPM_SM_UTIL), vals.get(GPM_SM_OCCUPANCY)

    async def close(self) -> None:
        for d in (self._gpm_prev, self._gpm_spare):
            for s in d.values():
                if s is not None:
                    self._field("nvmlGpmSampleFree", s)
            d.clear()
        if self.available:
            self.backend.shutdown()
        self.available = False
