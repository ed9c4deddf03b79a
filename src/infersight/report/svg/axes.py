"""Axes for the report's SVG charts: scales, round tick values and number formats."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = ["Axis", "finite_points", "fmt_value", "log_ticks", "nice_ticks", "value_range"]


@dataclass
class Axis:
    """A linear or log scale from data values to pixels."""

    lo: float
    hi: float
    log: bool
    px0: float
    px1: float
    ticks: list[float] = field(default_factory=list)

    def map(self, v: float) -> float:
        if self.log:
            v = math.log10(max(v, 1e-300))
            lo, hi = math.log10(self.lo), math.log10(self.hi)
        else:
            lo, hi = self.lo, self.hi
        span = hi - lo or 1.0
        return self.px0 + (v - lo) / span * (self.px1 - self.px0)


def fmt_value(v: float, unit: str = "") -> str:
    """Human format: seconds as us/ms/s, fractions as %, others with k/M suffixes."""
    if v is None or not math.isfinite(v):
        return "-"
    if unit == "s":
        a = abs(v)
        if a == 0:
            return "0"
        if a < 1e-3:
            return f"{v * 1e6:.3g} µs"
        if a < 1:
            return f"{v * 1e3:.3g} ms"
        return f"{v:.3g} s"
    if unit == "%":
        return f"{v:.3g}%"
    if unit == "frac":
        return f"{v * 100:.3g}%"
    a = abs(v)
    if a >= 1e9:
        return f"{v / 1e9:.3g}G"
    if a >= 1e6:
        return f"{v / 1e6:.3g}M"
    if a >= 1e4:
        return f"{v / 1e3:.3g}k"
    return f"{v:.4g}"


def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """About ``n`` round tick values covering [lo, hi]."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return [lo]
    raw = (hi - lo) / max(n, 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    k = math.ceil(lo / step - 1e-9)
    digits = max(0, 3 - math.floor(math.log10(step)))
    out: list[float] = []
    while (v := k * step) <= hi + step * 1e-9 and len(out) < 50:
        out.append(round(v, digits) + 0.0)  # round away float noise (0.6000000001)
        k += 1
    return out


def log_ticks(lo: float, hi: float) -> list[float]:
    d0, d1 = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    mults = (1, 2, 5) if d1 - d0 <= 3 else (1,)
    return [m * 10**d for d in range(d0, d1 + 1) for m in mults if lo <= m * 10**d <= hi]


def finite_points(
    xs: Sequence[float], ys: Sequence[float], xlog: bool, ylog: bool
) -> list[tuple[float, float]]:
    pts = []
    for x, y in zip(xs, ys, strict=False):
        if x is None or y is None or not (math.isfinite(x) and math.isfinite(y)):
            continue
        if (xlog and x <= 0) or (ylog and y <= 0):
            continue
        pts.append((float(x), float(y)))
    return pts


def value_range(vals: list[float], log: bool, zero: bool) -> tuple[float, float]:
    if not vals:
        return (1.0, 10.0) if log else (0.0, 1.0)
    lo, hi = min(vals), max(vals)
    if zero and not log:
        lo = min(lo, 0.0)
    if hi <= lo:
        if log:
            lo, hi = lo / 2, hi * 2
        else:
            pad = abs(hi) * 0.1 or 1.0
            lo, hi = lo - (0 if zero and lo == 0 else pad), hi + pad
    return lo, hi
