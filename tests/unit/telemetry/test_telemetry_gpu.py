"""The GPU sampler over replayed NVML readings (same code path as a real GPU)."""

from __future__ import annotations

import logging
from importlib import resources
from pathlib import Path

import pytest

from infersight.core.records import Sample
from infersight.telemetry import GpuSampler, PynvmlBackend, ReplayBackend, throttle_reason_names

DATA = resources.files("infersight.data").joinpath("telemetry")


def _fixture(name: str) -> Path:
    return Path(str(DATA.joinpath(name)))


def _by(out: list[Sample], gpu: str) -> dict[str, float | None]:
    return {s.name: s.value for s in out if s.labels.get("gpu") == gpu and "pid" not in s.labels}


async def test_values_and_units_from_replay() -> None:
    backend = ReplayBackend(_fixture("nvml_replay_h100_a100.json"))
    g = GpuSampler(backend)
    r0 = await g.sample()
    h100 = _by(r0, "0")
    assert h100["gpu.utilization"] == pytest.approx(0.98)  # percent -> 0..1
    assert h100["gpu.memory_used_bytes"] == 82433802240
    assert h100["gpu.memory_total_bytes"] == 85520809984
    assert h100["gpu.power_watts"] == pytest.approx(412.503)  # mW -> W
    assert h100["gpu.power_limit_watts"] == pytest.approx(700.0)
    assert h100["gpu.sm_clock_mhz"] == 1980
    assert h100["gpu.mem_clock_mhz"] == 2619
    assert h100["gpu.temperature_c"] == 63
    assert h100["gpu.pcie_rx_bytes_per_s"] == 1048576 * 1024  # KB/s -> B/s
    assert h100["gpu.pcie_tx_bytes_per_s"] == 20480 * 1024
    assert h100["gpu.throttle_reasons"] == 0
    # GPM needs two samples: not available in the first round
    assert h100["gpu.sm_activity"] is None
    procs = [s for s in r0 if s.name == "gpu.process_memory_bytes" and s.labels["gpu"] == "0"]
    assert [(p.labels["pid"], p.value) for p in procs] == [("41234", 81923145728)]

    r1 = await g.sample()
    h100 = _by(r1, "0")
    assert h100["gpu.sm_activity"] == pytest.approx(0.38)  # busy 100% but SMs 38%
    assert h100["gpu.sm_occupancy"] == pytest.approx(0.195)
    assert h100["gpu.utilization"] == pytest.approx(1.0)
    assert throttle_reason_names(h100["gpu.throttle_reasons"]) == ["sw_power_cap"]
    await g.close()


async def test_not_available_fields_read_as_none() -> None:
    g = GpuSampler(ReplayBackend(_fixture("nvml_replay_h100_a100.json")))
    a100 = _by(await g.sample(), "1")
    assert a100["gpu.utilization"] == pytest.approx(0.12)
    assert a100["gpu.pcie_rx_bytes_per_s"] is None  # NOT_SUPPORTED
    assert a100["gpu.pcie_tx_bytes_per_s"] is None
    assert a100["gpu.sm_activity"] is None  # no GPM on Ampere
    # new call missing on an old driver -> falls back to the old name
    assert throttle_reason_names(a100["gpu.throttle_reasons"]) == ["gpu_idle"]
    a100_1 = await g.sample()
    assert _by(a100_1, "1")["gpu.power_watts"] is None  # NVML_ERROR_UNKNOWN in round 2
    hidden = [s for s in a100_1 if s.name == "gpu.process_memory_bytes" and s.labels["gpu"] == "1"]
    assert len(hidden) == 1 and hidden[0].value is None
    # every contract field is present for every GPU, available or not
    names = {
        "gpu.utilization",
        "gpu.sm_activity",
        "gpu.memory_used_bytes",
        "gpu.memory_total_bytes",
        "gpu.power_watts",
        "gpu.power_limit_watts",
        "gpu.sm_clock_mhz",
        "gpu.mem_clock_mhz",
        "gpu.temperature_c",
        "gpu.pcie_rx_bytes_per_s",
        "gpu.pcie_tx_bytes_per_s",
        "gpu.throttle_reasons",
    }
    assert names <= set(_by(a100_1, "0")) and names <= set(_by(a100_1, "1"))
    await g.close()


async def test_describe() -> None:
    g = GpuSampler(ReplayBackend(_fixture("nvml_replay_h100_a100.json")))
    d = g.describe()
    assert [x["name"] for x in d] == ["NVIDIA H100 80GB HBM3", "NVIDIA A100-PCIE-40GB"]
    assert d[0]["driver_version"] == "550.54.15"


async def test_no_driver_degrades_with_one_message(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="infersight.telemetry.gpu")
    g = GpuSampler(ReplayBackend(_fixture("nvml_no_driver.json")))
    for _ in range(3):
        assert await g.sample() == []
    msgs = [r.getMessage() for r in caplog.records if r.name == "infersight.telemetry.gpu"]
    assert len(msgs) == 1 and "driver" in msgs[0]
    assert g.unavailable_reason is not None and "driver" in g.unavailable_reason
    await g.close()


async def test_real_nvml_without_a_gpu_here(caplog: pytest.LogCaptureFixture) -> None:
    """On this machine there is no NVIDIA driver: the real backend must degrade too.
    (On a GPU machine this asserts real readings instead.)"""
    caplog.set_level(logging.WARNING, logger="infersight.telemetry.gpu")
    g = GpuSampler(PynvmlBackend())
    out = await g.sample()
    if g.available and out:
        assert all(s.labels["gpu"].isdigit() for s in out)
        util = [s.value for s in out if s.name == "gpu.utilization" and s.value is not None]
        assert all(0.0 <= u <= 1.0 for u in util)
    else:
        assert out == []
        assert g.unavailable_reason
        await g.sample()
        assert len([r for r in caplog.records if r.name == "infersight.telemetry.gpu"]) == 1
    await g.close()


async def test_every_nvml_call_exists_in_pynvml() -> None:
    """No GPU here: at least prove the real backend would call functions that exist in
    the installed nvidia-ml-py (a typo would silently read as N/A on a real GPU)."""
    import pynvml

    backend = ReplayBackend(_fixture("nvml_replay_h100_a100.json"))
    g = GpuSampler(backend)
    g.describe()
    for _ in range(3):
        await g.sample()
    await g.close()
    called = set(backend.calls)
    assert {"nvmlGpmSampleGet", "nvmlDeviceGetPcieThroughput", "nvmlGpmSampleFree"} <= called
    missing = sorted(fn for fn in called if not hasattr(pynvml, fn))
    assert missing == []
    # and the constants the sampler hard-codes match nvml.h as pynvml spells them
    from infersight.telemetry import gpu, nvml

    assert (gpu._CLOCK_SM, gpu._CLOCK_MEM) == (pynvml.NVML_CLOCK_SM, pynvml.NVML_CLOCK_MEM)
    assert gpu._TEMP_GPU == pynvml.NVML_TEMPERATURE_GPU
    assert (gpu._PCIE_TX, gpu._PCIE_RX) == (
        pynvml.NVML_PCIE_UTIL_TX_BYTES,
        pynvml.NVML_PCIE_UTIL_RX_BYTES,
    )
    assert nvml.GPM_SM_UTIL == pynvml.NVML_GPM_METRIC_SM_UTIL
    assert nvml.GPM_SM_OCCUPANCY == pynvml.NVML_GPM_METRIC_SM_OCCUPANCY
    reasons = {
        0x4: pynvml.nvmlClocksThrottleReasonSwPowerCap,
        0x40: pynvml.nvmlClocksThrottleReasonHwThermalSlowdown,
        0x1: pynvml.nvmlClocksThrottleReasonGpuIdle,
    }
    assert all(bit == value for bit, value in reasons.items())
