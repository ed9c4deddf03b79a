"""infersight.entrypoints: each command as an importable function.

The CLI parses flags and hands off here; this layer assembles the pieces the feature
packages leave apart (``diagnose --url``: what telemetry saw, then the pure diagnosis).

Names are imported on first use, so ``infersight --help`` stays fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from infersight.entrypoints.diagnose import load_inputs, print_diagnoses, watch_url

_WHERE = {
    "load_inputs": "diagnose", "print_diagnoses": "diagnose", "watch_url": "diagnose",
}  # fmt: skip

__all__ = ["load_inputs", "print_diagnoses", "watch_url"]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'infersight.entrypoints' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"infersight.entrypoints.{_WHERE[name]}"), name)
    globals()[name] = value
    return value
