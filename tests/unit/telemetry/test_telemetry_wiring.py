"""The one recorder factory: which samplers it wires, and how a missing GPU is told."""

from __future__ import annotations

import logging
import os
from importlib import resources
from pathlib import Path

import pytest

from infersight.telemetry import EngineScraper, ReplayBackend, build_recorder

DATA = resources.files("infersight.data").joinpath("telemetry")


def _replay(name: str) -> ReplayBackend:
    return ReplayBackend(Path(str(DATA.joinpath(name))))


async def test_host_processes_and_gpus_in_one_recorder() -> None:
    tel = build_recorder(
        interval=0.5,
        processes={"me": os.getpid()},
        gpu_backend=_replay("nvml_replay_h100_a100.json"),
    )
    assert [s.name for s in tel.recorder.samplers] == ["host", "gpu"]
    assert tel.gpu_reason is None and tel.gpu_note is None
    assert [g["name"] for g in tel.gpus] == ["NVIDIA H100 80GB HBM3", "NVIDIA A100-PCIE-40GB"]
    try:
        samples = await tel.recorder.sample_once()
    finally:
        await tel.recorder.stop()
    names = {s.name for s in samples}
    assert {"host.memory_used_bytes", "process.rss_bytes", "gpu.memory_used_bytes"} <= names
    assert {s.labels["name"] for s in samples if s.name == "process.rss_bytes"} == {"me"}


async def test_no_gpu_is_a_reason_not_a_log_line(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="infersight.telemetry.gpu")
    tel = build_recorder(gpu_backend=_replay("nvml_no_driver.json"))
    assert tel.gpus == [] and tel.gpu_reason is not None and "driver" in tel.gpu_reason
    assert tel.gpu_note == f"no GPU metrics: {tel.gpu_reason}"
    # Kept in the recorder (the exporter's /health lists it with the reason), silent.
    assert tel.gpu is not None and tel.gpu in tel.recorder.samplers
    try:
        samples = await tel.recorder.sample_once()
    finally:
        await tel.recorder.stop()
    assert not [s for s in samples if s.name.startswith("gpu.")]
    assert not [r for r in caplog.records if r.name == "infersight.telemetry.gpu"]


async def test_scrapers_from_urls_or_ready_made() -> None:
    ready = EngineScraper("http://127.0.0.1:9/metrics", engine="vllm")
    tel = build_recorder(
        gpu=False,
        scrape=["http://127.0.0.1:8/v1", ready],
        api_key="k-123",
        slots=4,
        scrape_timeout=0.5,
    )
    assert tel.gpu is None and tel.gpu_reason is None
    built, given = tel.scrapers
    assert given is ready and tel.recorder.samplers == [tel.recorder.samplers[0], built, ready]
    assert built.url == "http://127.0.0.1:8/metrics" and built.timeout == 0.5
    assert built._headers["Authorization"] == "Bearer k-123"
    assert built._slots == 4 and ready._slots is None
    assert ready._headers == {}  # the key is for the scrapers built here
    await tel.recorder.stop()
