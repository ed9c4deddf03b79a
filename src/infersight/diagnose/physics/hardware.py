"""Device peaks: the Device record and the short measured CPU microbenchmark (the GPU
peak table is in :mod:`infersight.diagnose.physics.gpus`)."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import os
import platform
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

__all__ = ["GIB", "Device", "measure_cpu"]

GIB = 1024**3


@dataclass(frozen=True, slots=True)
class Device:
    """Peak memory, bandwidth and FLOP/s of one device (or N identical ones)."""

    key: str
    name: str
    memory_bytes: float
    bandwidth: float  # bytes/s
    flops: dict[str, float]  # dtype -> dense FLOP/s
    source: str
    kind: str = "gpu"  # "gpu" | "cpu"
    count: int = 1
    estimate: bool = False
    measured: bool = False
    #: CPU devices: the cores the FLOP/s figure covers (see :meth:`with_cores`).
    cores: int = 0
    #: The FLOP/s figure was calibrated from a run (a CPU's tokens/s at the run's
    #: measured knee), not taken from a generic microbenchmark (docs/design.md s.5).
    calibrated: bool = False

    @property
    def compute_trusted(self) -> bool:
        """Whether the FLOP/s figure may bound compute: a GPU's table peak or a
        calibrated CPU; never a float32 matmul's figure for a CPU engine."""
        return self.kind != "cpu" or self.calibrated or not self.measured

    def calibrated_to(self, flops: float, source: str) -> Device:
        """The same device with its FLOP/s calibrated from a run."""
        each = flops / self.count
        return dataclasses.replace(
            self, flops={"bf16": each, "fp16": each, "fp32": each}, source=source, calibrated=True
        )

    def peak_flops(self, dtype: str = "bf16") -> float:
        """Dense FLOP/s for ``dtype``; falls back to fp16, then bf16, then the best known."""
        d = dtype.lower()
        d = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "auto": "bf16"}.get(d, d)
        for k in (d, "fp16", "bf16"):
            v = self.flops.get(k, 0.0)
            if v > 0:
                return v * self.count
        return max(self.flops.values(), default=0.0) * self.count

    @property
    def total_bandwidth(self) -> float:
        return self.bandwidth * self.count

    def scaled(self, count: int) -> Device:
        """The same device ``count`` times (tensor parallel: memory, bandwidth and FLOP/s add)."""
        return dataclasses.replace(self, count=max(1, count))

    def with_cores(self, cores: int) -> Device:
        """A CPU device limited to ``cores`` cores (an engine running that many threads)."""
        if self.kind != "cpu" or not self.cores or cores <= 0 or cores >= self.cores:
            return self
        f = cores / self.cores
        return dataclasses.replace(
            self,
            name=f"{self.name.split(' (')[0]} ({cores} of {self.cores} cores)",
            flops={k: v * f for k, v in self.flops.items()},
            cores=cores,
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready copy (stored in a RunResult so readers reuse the same peaks)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> Device:
        """The inverse of :meth:`to_dict`; raises KeyError/TypeError/ValueError on bad input."""
        names = {f.name for f in dataclasses.fields(cls)}
        kw = {k: v for k, v in doc.items() if k in names}
        kw["flops"] = {str(k): float(v) for k, v in dict(kw.get("flops") or {}).items()}
        for k in ("memory_bytes", "bandwidth"):
            kw[k] = float(kw[k])
        return cls(**kw)

    def describe(self) -> str:
        n = f"{self.count}x " if self.count > 1 else ""
        return (
            f"{n}{self.name}: {self.memory_bytes / GIB:.1f} GiB, "
            f"{self.bandwidth / 1e9:.0f} GB/s, {self.peak_flops('bf16') / self.count / 1e12:.1f} "
            f"TFLOP/s bf16{self._origin()}"
        )

    def _origin(self) -> str:
        if self.calibrated:
            return " (calibrated from the run)"
        return " (measured)" if self.measured else ""


_BENCH_CODE = r"""
import json, sys, time
import numpy as np
budget = float(sys.argv[1]) / 2
src = np.ones(64 * 1024 * 1024 // 8); dst = np.empty_like(src)
bw = 0.0; t_end = time.perf_counter() + budget
while True:
    t0 = time.perf_counter(); np.copyto(dst, src); dt = time.perf_counter() - t0
    bw = max(bw, 2 * src.nbytes / dt)
    if time.perf_counter() > t_end: break
n = 256; a = np.ones((n, n), dtype=np.float32); b = np.ones((n, n), dtype=np.float32)
fl = 0.0; t_end = time.perf_counter() + budget
while True:
    t0 = time.perf_counter(); a @ b; dt = time.perf_counter() - t0
    fl = max(fl, 2 * n ** 3 / dt)
    if time.perf_counter() > t_end: break
print(json.dumps({"bandwidth": bw, "flops_per_core": fl}))
"""


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def _cache_path() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "infersight" / "cpu_peaks.json"


def _run_bench(seconds: float) -> dict[str, float]:
    # One BLAS thread in a child process: a per-core peak is robust on a shared host
    # (a multi-threaded BLAS stalls whenever one of its threads is descheduled).
    env = {
        **os.environ,
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }
    out = subprocess.run(
        [sys.executable, "-c", _BENCH_CODE, str(seconds)],
        env=env,
        capture_output=True,
        text=True,
        timeout=30 + 4 * seconds,
        check=True,
    )
    doc = json.loads(out.stdout.strip().splitlines()[-1])
    return {"bandwidth": float(doc["bandwidth"]), "flops_per_core": float(doc["flops_per_core"])}


@functools.lru_cache(maxsize=1)
def measure_cpu(seconds: float = 1.0) -> Device:
    """Measure this host's memory bandwidth and FLOP/s with numpy in about ``seconds``.

    Bandwidth: best of repeated copies of a 64 MiB buffer (bytes read + written / s),
    so caches do not flatter it. FLOP/s: best of repeated float32 matmuls (2·n³ each)
    on one core, times the cores this process may use. Best-of, and the best over
    earlier runs kept in ``~/.cache/infersight/cpu_peaks.json``, because other
    processes on a shared host only ever make a peak look lower than it is.
    """
    host = f"{platform.node()}|{platform.processor() or platform.machine()}|{_cores()}"
    cache: dict[str, dict[str, float]] = {}
    path = _cache_path()
    with contextlib.suppress(OSError, ValueError):
        cache = json.loads(path.read_text())
    prev = cache.get(host, {})
    try:
        now = _run_bench(seconds)
    except (OSError, subprocess.SubprocessError, ValueError, KeyError, IndexError):
        now = {"bandwidth": 0.0, "flops_per_core": 0.0}
    best = {k: max(float(prev.get(k, 0.0)), now[k]) for k in now}
    if best != prev:
        with contextlib.suppress(OSError):
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps({**cache, host: best}))
            tmp.replace(path)
    mem = float(psutil.virtual_memory().total)
    cores = _cores()
    fl = best["flops_per_core"] * cores
    return Device(
        key="cpu",
        name=f"host CPU ({cores} cores)",
        memory_bytes=mem,
        bandwidth=best["bandwidth"],
        flops={"bf16": fl, "fp16": fl, "fp32": fl},
        source=(
            f"measured: numpy 64 MiB copy {best['bandwidth'] / 1e9:.1f} GB/s, float32 "
            f"matmul {best['flops_per_core'] / 1e9:.0f} GFLOP/s per core x {cores} cores "
            "(best of repeats and of earlier runs on this host)"
        ),
        kind="cpu",
        cores=cores,
        measured=True,
    )
