"""Physics of LLM serving: model shapes, device peaks, roofline floors, capacity plans."""

from infersight.diagnose.physics.capacity import (
    CapacityPlan,
    load_shape,
    plan_capacity,
)
from infersight.diagnose.physics.floors import (
    DecodeFloor,
    PrefillFloor,
    compute_knee,
    decode_floor,
    prefill_floor,
)
from infersight.diagnose.physics.gguf import GGUFError, GGUFFile, GGUFTensor, read_gguf
from infersight.diagnose.physics.gpus import close_gpu_names, find_gpu, gpu_table, with_nvml_memory
from infersight.diagnose.physics.hardware import Device, measure_cpu
from infersight.diagnose.physics.loaders import shape_from_gguf, shape_from_hf_config
from infersight.diagnose.physics.shape import ModelShape, dtype_bytes
from infersight.diagnose.physics.slots import SlotAdvice, memory_budget, recommend_slots

__all__ = [
    "CapacityPlan",
    "DecodeFloor",
    "Device",
    "GGUFError",
    "GGUFFile",
    "GGUFTensor",
    "ModelShape",
    "PrefillFloor",
    "SlotAdvice",
    "close_gpu_names",
    "compute_knee",
    "decode_floor",
    "dtype_bytes",
    "find_gpu",
    "gpu_table",
    "load_shape",
    "measure_cpu",
    "memory_budget",
    "plan_capacity",
    "prefill_floor",
    "read_gguf",
    "recommend_slots",
    "shape_from_gguf",
    "shape_from_hf_config",
    "with_nvml_memory",
]
