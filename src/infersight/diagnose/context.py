"""What a RunResult says about its target: the engine, its slot limit, the model's
shape and the device, so rules can name the right settings and compute floors."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infersight.core.records import RunResult
from infersight.diagnose.physics.hardware import Device, find_gpu, measure_cpu
from infersight.diagnose.physics.loaders import shape_from_hf_config
from infersight.diagnose.physics.shape import ModelShape
from infersight.diagnose.signals import SampleIndex

__all__ = ["RunContext", "detect_engine", "resolve_context"]

log = logging.getLogger(__name__)

_ENGINE_ALIASES = {
    "vllm": "vllm", "sglang": "sglang", "tgi": "tgi", "text-generation-inference": "tgi",
    "llama.cpp": "llamacpp", "llamacpp": "llamacpp", "llama-cpp": "llamacpp",
    "infersight": "gateway", "gateway": "gateway", "openai": "hosted", "hosted": "hosted",
}  # fmt: skip


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
    gpu_count: int
    has_engine_metrics: bool
    has_gpu: bool
    notes: list[str]


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


def _slots(result: RunResult, idx: SampleIndex) -> tuple[float | None, str]:
    if idx.has("engine.slots"):
        vals = idx.values("engine.slots", float("-inf"), float("inf"))
        if vals:
            return float(sum(a.max() for a in vals)), "engine /metrics (engine.slots)"
    eng = result.config.get("engine")
    if isinstance(eng, dict):
        for key in ("parallel", "max_num_seqs", "max_running_requests", "slots",
                    "max_concurrent_requests"):
            v = eng.get(key)
            if isinstance(v, int | float) and v > 0:
                return float(v), f"run config (engine.{key})"
    return None, ""


def _gpu_name(result: RunResult) -> tuple[str | None, int]:
    env = result.environment
    gpus = env.get("gpus") if isinstance(env, dict) else None
    if isinstance(gpus, list) and gpus:
        first = gpus[0]
        name = first.get("name") if isinstance(first, dict) else str(first)
        return (str(name) if name else None), len(gpus)
    gpu = env.get("gpu") if isinstance(env, dict) else None
    if isinstance(gpu, dict) and gpu.get("name"):
        return str(gpu["name"]), int(gpu.get("count", 1))
    if isinstance(gpu, str):
        return gpu, 1
    return None, 0


def _load_shape(spec: Any) -> ModelShape | None:
    from infersight.diagnose.physics.plan import load_shape

    try:
        if isinstance(spec, ModelShape):
            return spec
        if isinstance(spec, dict):
            return shape_from_hf_config(spec)
        if isinstance(spec, str | Path) and (str(spec) == "embedded" or Path(spec).exists()):
            return load_shape(spec)
    except (OSError, ValueError) as e:
        log.info("cannot read model shape from %s: %s", spec, e)
    return None


def resolve_context(
    result: RunResult,
    idx: SampleIndex,
    *,
    model: Any = None,
    gpu: str | Device | None = None,
) -> RunContext:
    """Engine, slots and physics for ``result``; explicit ``model``/``gpu`` win."""
    engine = detect_engine(result, idx)
    slots, slots_src = _slots(result, idx)
    eng_cfg = result.config.get("engine") if isinstance(result.config.get("engine"), dict) else {}
    assert isinstance(eng_cfg, dict)
    phys = result.config.get("physics") if isinstance(result.config.get("physics"), dict) else {}
    assert isinstance(phys, dict)
    notes: list[str] = []
    spec = (model or phys.get("model") or eng_cfg.get("model_config")
            or eng_cfg.get("model_path") or eng_cfg.get("model"))
    if spec is None and engine == "embedded":
        spec = "embedded"
    shape = _load_shape(spec) if spec is not None else None
    has_gpu = idx.has("gpu.utilization") or idx.has("gpu.sm_activity")
    gname, gcount = _gpu_name(result)
    device: Device | None = None
    if isinstance(gpu, Device):
        device = gpu
    else:
        gname = gpu or phys.get("gpu") or gname
        if gname:
            device = find_gpu(str(gname))
            if device is None:
                notes.append(f"GPU {gname!r} is not in the peak table: no roofline floors")
            else:
                n = int(phys.get("gpus") or eng_cfg.get("tensor_parallel_size") or 1)
                device = device.scaled(n)
    threads = eng_cfg.get("threads")
    if device is None and engine == "embedded":
        device = measure_cpu()
        if isinstance(threads, int) and threads > 0:
            device = device.with_cores(threads)  # the engine computes on its threads only
        notes.append("CPU peaks measured on this host (numpy copy + matmul)")
    ctx_slot = eng_cfg.get("ctx_per_slot")
    return RunContext(
        engine=engine,
        slots=slots,
        slots_source=slots_src,
        threads=int(threads) if isinstance(threads, int | float) and threads else None,
        ctx_per_slot=int(ctx_slot) if isinstance(ctx_slot, int | float) and ctx_slot else None,
        shape=shape,
        device=device,
        gpu_count=gcount,
        has_engine_metrics=idx.has("engine.requests_running") or idx.has("engine.requests_waiting"),
        has_gpu=has_gpu,
        notes=notes,
    )
