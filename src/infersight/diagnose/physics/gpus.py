"""The shipped GPU peak table (``data/physics/gpus.toml``) and matching a device name,
as users type it or NVML reports it, to its entry."""

from __future__ import annotations

import dataclasses
import difflib
import functools
import re
import tomllib
from dataclasses import dataclass
from importlib import resources
from typing import Any

from infersight.diagnose.physics.hardware import GIB, Device

__all__ = ["close_gpu_names", "find_gpu", "gpu_table", "with_nvml_memory"]


def _norm(s: str) -> str:
    return re.sub(r"[^a-z0-9]+", " ", s.lower()).strip()


@functools.lru_cache(maxsize=1)
def gpu_table() -> dict[str, Device]:
    """The shipped peak table (``infersight/data/physics/gpus.toml``), keyed by id."""
    text = resources.files("infersight.data").joinpath("physics/gpus.toml").read_text()
    doc: dict[str, Any] = tomllib.loads(text)
    out: dict[str, Device] = {}
    for key, e in doc.get("gpu", {}).items():
        out[key] = Device(
            key=key,
            name=str(e["name"]),
            memory_bytes=float(e["memory_gib"]) * GIB,
            bandwidth=float(e["bandwidth_gbs"]) * 1e9,
            flops={d: float(e.get(f"{d}_tflops", 0.0)) * 1e12 for d in ("bf16", "fp16", "fp8")},
            source=str(e["source"]),
            estimate=bool(e.get("estimate", False)),
        )
    return out


@dataclass(frozen=True, slots=True)
class _Entry:
    """How one table entry is matched against a device name."""

    key: str
    family: str
    form: str
    marketed_gb: float
    aliases: tuple[str, ...]


@functools.lru_cache(maxsize=1)
def _entries() -> tuple[_Entry, ...]:
    doc = tomllib.loads(
        resources.files("infersight.data").joinpath("physics/gpus.toml").read_text()
    )
    out = []
    for key, e in doc.get("gpu", {}).items():
        names = [key, e["name"], *e.get("aliases", [])]
        out.append(
            _Entry(
                key=key,
                family=str(e.get("family", "")),
                form=str(e.get("form", "")),
                marketed_gb=float(e.get("memory_marketed_gb", 0.0)),
                aliases=tuple(_norm(str(n)) for n in names),
            )
        )
    return tuple(out)


_MEM_RE = re.compile(r"\b(\d+)\s*gb?\b")


def _form_of(tokens: list[str]) -> str:
    if "pcie" in tokens:
        return "pcie"
    if "nvl" in tokens:
        return "nvl"
    if any(t.startswith(("sxm", "hgx")) for t in tokens):
        return "sxm"
    return ""


def find_gpu(name: str) -> Device | None:
    """Look up a GPU by id, name, alias or an NVML name ("NVIDIA A100-PCIE-40GB").

    An exact id/alias wins. Otherwise the part is found by its family token ("a100"),
    then the memory size the name states ("40GB": never a card with more memory than
    stated; None when only bigger ones are known), then the form (PCIe, NVL, SXM;
    NVML names of SXM parts often state none), then the longest alias in the name.
    """
    n = _norm(name)
    table, entries = gpu_table(), _entries()
    for e in entries:
        if n in e.aliases:
            return table[e.key]
    tokens = n.split()
    cands = [e for e in entries if e.family and e.family in tokens]
    if not cands:  # no family token: an alias inside a longer name
        cands = [
            e for e in entries if any(a and re.search(rf"\b{re.escape(a)}\b", n) for a in e.aliases)
        ]
    m = _MEM_RE.search(n)
    if m and cands:
        gb = float(m.group(1))
        same = [e for e in cands if e.marketed_gb == gb]
        cands = same or [e for e in cands if e.marketed_gb <= gb]
    if not cands:
        return None
    form = _form_of(tokens)

    def score(e: _Entry) -> tuple[int, int, float]:
        f = 2 if form and e.form == form else (1 if not form and e.form in ("", "sxm") else 0)
        contained = max(
            (len(a) for a in e.aliases if a and re.search(rf"\b{re.escape(a)}\b", n)), default=0
        )
        return f, contained, -e.marketed_gb  # the smaller card when nothing else decides

    return table[max(cands, key=score).key]


def with_nvml_memory(device: Device, memory_bytes: float | None) -> Device:
    """``device`` with the memory NVML reported (what the engine can really use)."""
    if not memory_bytes or memory_bytes <= 0 or device.kind != "gpu":
        return device
    return dataclasses.replace(
        device,
        memory_bytes=float(memory_bytes),
        source=f"{device.source}; memory {memory_bytes / GIB:.1f} GiB from NVML memory.total",
    )


def close_gpu_names(name: str, n: int = 5) -> list[str]:
    """Known GPU ids closest to ``name`` (for 'did you mean' errors)."""
    keys = list(gpu_table())
    close = difflib.get_close_matches(name.lower(), keys, n=n, cutoff=0.3)
    return close or keys[:n]
