"""GPU names as NVML reports them match the right peak-table entry, and the diagnosis
uses the memory NVML reported over the table's."""

from __future__ import annotations

import pytest
from diag_fixtures import make_run

from infersight.core.records import Sample
from infersight.diagnose import diagnose
from infersight.diagnose.context import resolve_context
from infersight.diagnose.physics import find_gpu, gpu_table
from infersight.diagnose.physics.hardware import GIB
from infersight.diagnose.signals import SampleIndex


@pytest.mark.parametrize(
    ("nvml_name", "key"),
    [
        ("NVIDIA A100-PCIE-40GB", "a100-40gb-pcie"),
        ("NVIDIA A100-SXM4-40GB", "a100-40gb"),
        ("NVIDIA A100-SXM4-80GB", "a100-80gb"),
        ("NVIDIA A100 80GB PCIe", "a100-80gb-pcie"),
        ("Tesla V100-SXM2-16GB", "v100-16gb"),
        ("Tesla V100-SXM2-32GB", "v100"),
        ("Tesla V100-PCIE-16GB", "v100-pcie-16gb"),
        ("NVIDIA H100 80GB HBM3", "h100-sxm"),
        ("NVIDIA H100 PCIe", "h100-pcie"),
        ("NVIDIA H100 NVL", "h100-nvl"),
        ("NVIDIA H200", "h200"),
        ("NVIDIA L40S", "l40s"),
        ("NVIDIA L40", "l40"),
        ("NVIDIA A10G", "a10g"),
        ("NVIDIA A10", "a10"),
        ("Tesla T4", "t4"),
        ("NVIDIA GeForce RTX 4090", "rtx-4090"),
    ],
)
def test_nvml_names(nvml_name: str, key: str) -> None:
    dev = find_gpu(nvml_name)
    assert dev is not None and dev.key == key, (nvml_name, dev and dev.key)


@pytest.mark.parametrize(
    "name", ["NVIDIA A100-SXM4-24GB", "Tesla V100-SXM2-8GB", "NVIDIA H100 64GB", "NVIDIA RTX A6000"]
)
def test_never_a_bigger_card(name: str) -> None:
    dev = find_gpu(name)
    stated = 24 if "24GB" in name else 8 if "8GB" in name else 64 if "64GB" in name else None
    if dev is not None and stated is not None:
        assert dev.memory_bytes <= stated * GIB
    else:
        assert dev is None


def test_every_entry_finds_itself_by_name_and_key() -> None:
    for key, dev in gpu_table().items():
        assert find_gpu(key) == dev
        assert find_gpu(dev.name) == dev


def _a100_pcie_run(nvml_bytes: float | None, in_env: bool) -> tuple[object, float]:
    run = make_run(running=32, waiting=50, slots=32)
    run.environment = {"gpus": [{"name": "NVIDIA A100-PCIE-40GB", "index": 0}]}
    run.samples = [s for s in run.samples if s.name != "gpu.memory_total_bytes"]
    if nvml_bytes is not None:
        if in_env:
            run.environment["gpus"][0]["memory_total_bytes"] = nvml_bytes
        else:
            run.samples.append(Sample(1000.0, "gpu.memory_total_bytes", nvml_bytes, {"gpu": "0"}))
    ctx = resolve_context(run, SampleIndex(run.samples))
    assert ctx.device is not None and ctx.device.key == "a100-40gb-pcie"
    return run, ctx.device.memory_bytes


def test_nvml_memory_wins_over_the_table() -> None:
    table = gpu_table()["a100-40gb-pcie"].memory_bytes
    nvml = 40960 * 1024.0**2  # nvidia-smi's 40960MiB for an A100-PCIE-40GB
    _, from_env = _a100_pcie_run(nvml, in_env=True)
    _, from_samples = _a100_pcie_run(nvml, in_env=False)
    _, without = _a100_pcie_run(None, in_env=True)
    assert from_env == from_samples == nvml
    assert without == table
    # and it reaches the verdict: the memory-bound slot recommendation and its source
    run, _ = _a100_pcie_run(20 * GIB, in_env=True)  # e.g. a MIG slice or another tenant
    v = next(v for v in diagnose(run) if v.id == "slot_bound")
    floor_src = next(e.source for e in v.evidence if e.name == "ITL floor")
    assert "A100 PCIe 40GB: 20.0 GiB" in floor_src
    notes = [e.value for e in v.evidence if e.name == "note"]
    assert any("GPU memory 20.0 GiB as NVML reported it" in str(n) for n in notes)
