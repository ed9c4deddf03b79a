"""What a RunResult says about its target: the engine, its slot limit, the model's
shape and the device, so rules can name the right settings and compute floors."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infersight.core.errors import ConfigError
from infersight.core.records import RunResult
from infersight.diagnose.physics.capacity import load_shape
from infersight.diagnose.physics.gpus import find_gpu, with_nvml_memory
from infersight.diagnose.physics.hardware import GIB, Device, measure_cpu
from infersight.diagnose.physics.loaders import shape_from_hf_config
from infersight.diagnose.physics.shape import ModelShape
from infersight.diagnose.signals import SampleIndex

__all__ = ["RunContext", "detect_engine", "resolve_context", "stored_physics"]

log = logging.getLogger(__name__)

_ENGINE_ALIASES = {
    "vllm": "vllm",
    "sglang": "sglang",
    "tgi": "tgi",
    "text-generation-inference": "tgi",
    "llama.cpp": "llamacpp",
    "llamacpp": "llamacpp",
    "llama-cpp": "llamacpp",
    "infersight": "gateway",
    "gateway": "gateway",
    "openai": "hosted",
    "hosted": "hosted",
}


@dataclass(slots=True)
class RunContext:
    """The target as far as the RunResult tells."""

    engine: str  # vllm | sglang | tgi | llamacpp | embedded | gateway | hosted | unknown
    slots: float | None
    slots_source: str
    threads: int | None
    ctx_per_slot: int | None
    shape: ModelShape | None
    device: Device | None
    has_engine_metrics: bool
    has_gpu: bool
    notes: list[str]
    #: Floors the run stored per level (reused so every reader shows the same numbers).
    stored_floors: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: The stored device peaks were given, from the GPU table or calibrated when stored.
    stored_trusted: bool = False
    #: An admission limit the capacity curve shows (throughput flat, TPOT flat, TTFT
    #: growing), used as S when neither the engine nor the run states one.
    curve_slots: float | None = None
    curve_slots_source: str = ""
    #: Where the device peaks come from: "given", "stored", "table", "measured" or
    #: "calibrated" (a CPU's FLOP/s from the run's own knee).
    device_origin: str = ""

    @property
    def compute_trusted(self) -> bool:
        """Whether the device's FLOP/s may bound compute (MFU, the roofline's knee): a
        peak given or from the GPU table, or a CPU's calibrated from a run; never a
        CPU's generic matmul figure (docs/design.md section 5, notes on CPU engines)."""
        if self.device is None:
            return False
        return (
            self.device_origin in ("given", "calibrated")
            or self.stored_trusted
            or self.device.compute_trusted
        )


def _is_embedded(eng_cfg: Any) -> bool:
    """EmbeddedEngine.settings (recorded by bench) carry the GGUF path and slot count."""
    return isinstance(eng_cfg, dict) and "model_path" in eng_cfg and "parallel" in eng_cfg


def detect_engine(result: RunResult, idx: SampleIndex) -> str:
    """The engine the fixes should name, from sample labels, then the run config."""
    eng_cfg = result.config.get("engine")
    for name in ("engine.requests_running", "engine.requests_waiting", "engine.slots"):
        for lab in idx.labels(name):
            e = _ENGINE_ALIASES.get(str(lab.get("engine", "")).lower())
            if e:
                if e == "llamacpp" and _is_embedded(eng_cfg):
                    return "embedded"
                return e
    if isinstance(eng_cfg, dict):
        name = str(eng_cfg.get("engine", "")).lower()
        e = _ENGINE_ALIASES.get(name)
        if e == "llamacpp" and _is_embedded(eng_cfg):
            return "embedded"  # started by bench: infersight serve's settings
        if e:
            return e
    return "unknown"


def _slots(result: RunResult, idx: SampleIndex, stated: int | None) -> tuple[float | None, str]:
    """S, in order: --engine-slots now, --engine-slots at bench time, the engine's own
    export, the engine settings bench recorded. None: the rules may infer it."""
    if stated:
        return float(stated), "stated (--engine-slots)"
    at_bench = result.config.get("engine_slots")
    if isinstance(at_bench, int | float) and not isinstance(at_bench, bool) and at_bench > 0:
        return float(at_bench), "stated at bench time (--engine-slots)"
    if idx.has("engine.slots"):
        vals = idx.values("engine.slots", float("-inf"), float("inf"))
        if vals:
            return float(sum(a.max() for a in vals)), "engine /metrics (engine.slots)"
    eng = result.config.get("engine")
    if isinstance(eng, dict):
        for key in (
            "parallel",
            "max_num_seqs",
            "max_running_requests",
            "slots",
            "max_concurrent_requests",
        ):
            v = eng.get(key)
            if isinstance(v, int | float) and v > 0:
                return float(v), f"run config (engine.{key})"
    return None, ""


def _nvml_memory(result: RunResult, idx: SampleIndex) -> float | None:
    """Per-device memory NVML reported: the GPU description, else the samples."""
    gpus = result.environment.get("gpus") if isinstance(result.environment, dict) else None
    if isinstance(gpus, list) and gpus and isinstance(gpus[0], dict):
        v = gpus[0].get("memory_total_bytes")
        if isinstance(v, int | float) and v > 0:
            return float(v)
    vals = idx.values("gpu.memory_total_bytes", float("-inf"), float("inf"))
    return float(min(a.max() for a in vals)) if vals else None


def stored_physics(result: RunResult) -> dict[str, Any]:
    """What an earlier diagnosis stored (``environment["physics"]``), or {}."""
    env = result.environment if isinstance(result.environment, dict) else {}
    phys = env.get("physics")
    return phys if isinstance(phys, dict) else {}


def _stored_device(result: RunResult) -> Device | None:
    doc = stored_physics(result).get("device")
    if not isinstance(doc, dict):
        return None
    try:
        return Device.from_dict(doc)
    except (KeyError, TypeError, ValueError) as e:
        log.info("ignoring the stored device peaks: %s", e)
        return None


def _gpu_name(result: RunResult) -> str | None:
    env = result.environment
    gpus = env.get("gpus") if isinstance(env, dict) else None
    if isinstance(gpus, list) and gpus:
        first = gpus[0]
        name = first.get("name") if isinstance(first, dict) else str(first)
        return str(name) if name else None
    gpu = env.get("gpu") if isinstance(env, dict) else None
    if isinstance(gpu, dict) and gpu.get("name"):
        return str(gpu["name"])
    if isinstance(gpu, str):
        return gpu
    return None


def _load_shape(spec: Any) -> ModelShape | None:
    try:
        if isinstance(spec, ModelShape):
            return spec
        if isinstance(spec, dict):
            return shape_from_hf_config(spec)
        if isinstance(spec, str | Path) and (str(spec) == "embedded" or Path(spec).exists()):
            return load_shape(spec)
    except ConfigError as e:
        log.info("cannot read model shape from %s: %s", spec, e)
    return None


def _device(
    result: RunResult,
    idx: SampleIndex,
    engine: str,
    gpu: str | Device | None,
    eng_cfg: dict[str, Any],
    phys: dict[str, Any],
    notes: list[str],
) -> tuple[Device | None, str]:
    """Peaks, in order: given now, stored by the run, the table entry of the run's GPU
    (with NVML's memory), measured now on this machine (CPU engines)."""
    if isinstance(gpu, Device):
        return gpu, "given"
    if not gpu:
        stored = _stored_device(result)
        if stored is not None:
            where = stored_physics(result).get("measured_on") or "the run's host"
            kind = f"measured on {where}" if stored.measured else "peak table"
            notes.append(f"device peaks as stored in the run ({kind}): {stored.describe()}")
            return stored, "stored"
    gname = _gpu_name(result)
    gname = gpu or phys.get("gpu") or gname
    if gname:
        device = find_gpu(str(gname))
        if device is None:
            notes.append(f"GPU {gname!r} is not in the peak table: no roofline floors")
            return None, ""
        n = int(phys.get("gpus") or eng_cfg.get("tensor_parallel_size") or 1)
        nvml = None if gpu else _nvml_memory(result, idx)
        if nvml and abs(nvml - device.memory_bytes) > 0.01 * device.memory_bytes:
            notes.append(
                f"GPU memory {nvml / GIB:.1f} GiB as NVML reported it (the peak "
                f"table's {device.name} has {device.memory_bytes / GIB:.1f} GiB)"
            )
        device = with_nvml_memory(device, nvml)
        return device.scaled(n), "table"
    if engine == "embedded":
        device = measure_cpu()
        threads = eng_cfg.get("threads")
        if isinstance(threads, int) and threads > 0:
            device = device.with_cores(threads)  # the engine computes on its threads only
        notes.append(
            "CPU peaks measured now on the machine reading this run (it stored "
            "none): " + device.source
        )
        return device, "measured"
    return None, ""


def resolve_context(
    result: RunResult,
    idx: SampleIndex,
    *,
    model: Any = None,
    gpu: str | Device | None = None,
    engine_slots: int | None = None,
) -> RunContext:
    """Engine, slots and physics for ``result``; explicit ``model``/``gpu``/``engine_slots`` win."""
    engine = detect_engine(result, idx)
    slots, slots_src = _slots(result, idx, engine_slots)
    eng_cfg = result.config.get("engine") if isinstance(result.config.get("engine"), dict) else {}
    assert isinstance(eng_cfg, dict)
    phys = result.config.get("physics") if isinstance(result.config.get("physics"), dict) else {}
    assert isinstance(phys, dict)
    notes: list[str] = []
    spec = (
        model
        or phys.get("model")
        or eng_cfg.get("model_config")
        or eng_cfg.get("model_path")
        or eng_cfg.get("model")
    )
    if spec is None and engine == "embedded":
        spec = "embedded"
    shape = _load_shape(spec) if spec is not None else None
    has_gpu = idx.has("gpu.utilization") or idx.has("gpu.sm_activity")
    device, origin = _device(result, idx, engine, gpu, eng_cfg, phys, notes)
    threads = eng_cfg.get("threads")
    ctx_slot = eng_cfg.get("ctx_per_slot")
    floors = stored_physics(result).get("floors") if model is None and gpu is None else None
    return RunContext(
        engine=engine,
        slots=slots,
        slots_source=slots_src,
        threads=int(threads) if isinstance(threads, int | float) and threads else None,
        ctx_per_slot=int(ctx_slot) if isinstance(ctx_slot, int | float) and ctx_slot else None,
        shape=shape,
        device=device,
        has_engine_metrics=idx.has("engine.requests_running") or idx.has("engine.requests_waiting"),
        has_gpu=has_gpu,
        notes=notes,
        stored_floors=floors if isinstance(floors, dict) else {},
        device_origin=origin,
        stored_trusted=origin == "stored"
        and stored_physics(result).get("device_origin") in ("given", "table", "calibrated"),
    )
