"""Numbers read from JSON-like values (a result file, an aggregate, a request body):
a number is an int or a float, never a bool."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

__all__ = ["as_float", "number_at"]


def as_float(value: Any) -> float | None:
    """A finite number as float; None for anything else (null, NaN, text, bool)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    f = float(value)
    return f if math.isfinite(f) else None


def number_at(doc: Any, *path: str) -> float | None:
    """The number at ``doc[path[0]][path[1]]...`` (``doc`` itself with no path) as float,
    infinities and NaN included; None where a step is no mapping or the end no number."""
    for key in path:
        doc = doc.get(key) if isinstance(doc, Mapping) else None
    return float(doc) if isinstance(doc, int | float) and not isinstance(doc, bool) else None
