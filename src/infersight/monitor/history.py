"""A few minutes of what the monitor saw, one point per round, for its sparklines:
how busy the device was, requests running (R) and waiting (Q) against the slots (S),
generated tokens/s and TTFT where the engine exports it."""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

__all__ = ["HISTORY_SECONDS", "SPARKS", "History", "sparkline"]

#: How far back the sparklines reach.
HISTORY_SECONDS = 300.0
#: Eight heights of a sparkline cell, lowest first.
SPARKS = "▁▂▃▄▅▆▇█"


@dataclass
class History:
    """Points ``(t, value)`` per series name, the last ``span`` seconds of them."""

    span: float = HISTORY_SECONDS
    _points: dict[str, deque[tuple[float, float | None]]] = field(default_factory=dict)

    def add(self, t: float, name: str, value: float | None) -> None:
        d = self._points.setdefault(name, deque())
        d.append((t, value))
        while d and d[0][0] < t - self.span:
            d.popleft()

    def values(self, name: str) -> list[float | None]:
        return [v for _, v in self._points.get(name, ())]

    def seconds(self, name: str) -> float:
        """How long the series reaches back."""
        d = self._points.get(name)
        return d[-1][0] - d[0][0] if d and len(d) > 1 else 0.0

    def has(self, name: str) -> bool:
        """True when the series has at least one value (not only gaps)."""
        return any(v is not None for v in self.values(name))


def _buckets(values: list[float | None], width: int) -> list[float | None]:
    """``values`` squeezed to at most ``width`` cells: each cell the mean of its points
    (None where a cell has no value), the newest at the right."""
    if len(values) <= width:
        return values
    out: list[float | None] = []
    n = len(values)
    for i in range(width):
        cell = [v for v in values[i * n // width : (i + 1) * n // width] if v is not None]
        out.append(sum(cell) / len(cell) if cell else None)
    return out


def sparkline(values: list[float | None], width: int, top: float | None = None) -> str:
    """One line of block characters, ``width`` cells at most, scaled from 0 to ``top``
    (default: the largest value); a gap (no value) is a space."""
    cells = _buckets(values, max(1, width))
    finite = [v for v in cells if v is not None and math.isfinite(v)]
    hi = top if top is not None else max(finite, default=0.0)
    out = []
    for v in cells:
        if v is None or not math.isfinite(v):
            out.append(" ")
        elif hi <= 0:
            out.append(SPARKS[0])
        else:
            k = round(min(max(v / hi, 0.0), 1.0) * (len(SPARKS) - 1))
            out.append(SPARKS[k])
    return "".join(out)
