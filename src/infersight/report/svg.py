"""Small, dependency-free SVG charts for the self-contained HTML report.

Hand-made SVG keeps the report one file with no scripts, fonts or images to fetch,
renders in milliseconds, and stays a few kilobytes per chart because callers pass
already downsampled data (quantile CDFs, binned timelines).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape

__all__ = ["PALETTE", "Band", "Series", "chart", "fmt_value", "nice_ticks"]

#: Colour-blind-friendly palette (Okabe-Ito order, blue first).
PALETTE = (
    "#0072B2",
    "#D55E00",
    "#009E73",
    "#CC79A7",
    "#E69F00",
    "#56B4E9",
    "#7f7f7f",
    "#F0E442",
    "#000000",
)


@dataclass
class Series:
    """One plotted series. ``kind``: line, step, points, bars (stacked on ``base``)."""

    label: str
    xs: Sequence[float]
    ys: Sequence[float]
    color: str = PALETTE[0]
    kind: str = "line"
    dash: bool = False
    base: Sequence[float] | None = None
    #: Per-point text labels (points only), e.g. the load level name.
    point_labels: Sequence[str] | None = None
    #: Secondary y axis (right) for series with another unit.
    right: bool = False


@dataclass
class Band:
    """A shaded span of the x axis, e.g. one load level in a timeline."""

    x0: float
    x1: float
    label: str = ""


@dataclass
class _Axis:
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


def _log_ticks(lo: float, hi: float) -> list[float]:
    d0, d1 = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    mults = (1, 2, 5) if d1 - d0 <= 3 else (1,)
    return [m * 10**d for d in range(d0, d1 + 1) for m in mults if lo <= m * 10**d <= hi]


def _finite(
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


def _range(vals: list[float], log: bool, zero: bool) -> tuple[float, float]:
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


def chart(
    series: Sequence[Series],
    *,
    title: str,
    xlabel: str = "",
    ylabel: str = "",
    xunit: str = "",
    yunit: str = "",
    y2label: str = "",
    y2unit: str = "",
    xlog: bool = False,
    ylog: bool = False,
    ymax: float | None = None,
    bands: Sequence[Band] = (),
    width: int = 520,
    height: int = 300,
) -> str:
    """Render ``series`` to an inline ``<svg>`` string (all text escaped)."""
    ml, mr, mt, mb = 62, (58 if any(s.right for s in series) else 16), 30, 58
    pts = {id(s): _finite(s.xs, s.ys, xlog, ylog and not s.right) for s in series}
    for s in series:
        if s.kind == "bars" and s.base is not None:
            tops = [b + y for b, y in zip(s.base, s.ys, strict=False)]
            pts[id(s)] = _finite(s.xs, tops, xlog, False)
    left = [p for s in series if not s.right for p in pts[id(s)]]
    right = [p for s in series if s.right for p in pts[id(s)]]
    xs_all = [p[0] for s in series for p in pts[id(s)]] + [v for b in bands for v in (b.x0, b.x1)]
    x0, x1 = _range(xs_all, xlog, zero=False)
    if any(s.kind == "points" for s in series) and not xlog:
        pad = (x1 - x0) * 0.06  # room for the end points' labels
        x0, x1 = (max(0.0, x0 - pad) if x0 >= 0 else x0 - pad), x1 + pad
    y0, y1 = _range([p[1] for p in left], ylog, zero=True)
    if ymax is not None:
        y1 = max(y1, ymax) if not left else max(min(y1, ymax), y0 + 1e-12)
    xa = _Axis(x0, x1, xlog, ml, width - mr)
    ya = _Axis(y0, y1 * (1 if ylog else 1.05), ylog, height - mb, mt)
    xa.ticks = _log_ticks(x0, x1) if xlog else nice_ticks(x0, x1, 6)
    ya.ticks = _log_ticks(ya.lo, ya.hi) if ylog else nice_ticks(ya.lo, ya.hi, 5)
    out = [
        f'<svg class="plot" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img" aria-label="{escape(title)}">',
        f"<title>{escape(title)}</title>",
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="#fff"/>',
        f'<text x="{width / 2:.0f}" y="18" text-anchor="middle" class="pt">{escape(title)}</text>',
    ]
    for i, b in enumerate(bands):
        bx0, bx1 = xa.map(b.x0), xa.map(b.x1)
        fill = "#f2f5fa" if i % 2 == 0 else "#e6ebf3"
        out.append(
            f'<rect x="{bx0:.1f}" y="{mt}" width="{max(bx1 - bx0, 0.5):.1f}" '
            f'height="{height - mb - mt}" fill="{fill}"/>'
        )
        if b.label and bx1 - bx0 > 6.0 * len(b.label):  # skip labels that do not fit
            out.append(
                f'<text x="{(bx0 + bx1) / 2:.1f}" y="{mt + 10}" text-anchor="middle" '
                f'class="bl">{escape(b.label)}</text>'
            )
    for t in ya.ticks:
        y = ya.map(t)
        out.append(f'<line x1="{ml}" x2="{width - mr}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>')
        out.append(
            f'<text x="{ml - 5}" y="{y + 3:.1f}" text-anchor="end" class="tk">'
            f"{escape(fmt_value(t, yunit))}</text>"
        )
    for t in xa.ticks:
        x = xa.map(t)
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{mt}" y2="{height - mb}" class="grid"/>')
        out.append(
            f'<text x="{x:.1f}" y="{height - mb + 14}" text-anchor="middle" class="tk">'
            f"{escape(fmt_value(t, xunit))}</text>"
        )
    ra: _Axis | None = None
    if right:
        r0, r1 = _range([p[1] for p in right], False, zero=True)
        ra = _Axis(r0, r1 * 1.05, False, height - mb, mt, nice_ticks(r0, r1 * 1.05, 5))
        for t in ra.ticks:
            out.append(
                f'<text x="{width - mr + 5}" y="{ra.map(t) + 3:.1f}" class="tk">'
                f"{escape(fmt_value(t, y2unit))}</text>"
            )
    out.append(
        f'<rect x="{ml}" y="{mt}" width="{width - ml - mr}" height="{height - mt - mb}" '
        'fill="none" stroke="#888"/>'
    )
    n_bars = sum(1 for s in series if s.kind == "bars")
    for s in series:
        out.extend(_draw(s, pts[id(s)], xa, ra if s.right and ra else ya, n_bars))
    out.append(
        f'<text x="{(ml + width - mr) / 2:.0f}" y="{height - mb + 30}" text-anchor="middle" '
        f'class="al">{escape(xlabel)}</text>'
    )
    out.append(
        f'<text transform="translate(13,{(mt + height - mb) / 2:.0f}) rotate(-90)" '
        f'text-anchor="middle" class="al">{escape(ylabel)}</text>'
    )
    if right and y2label:
        out.append(
            f'<text transform="translate({width - 6},{(mt + height - mb) / 2:.0f}) rotate(-90)" '
            f'text-anchor="middle" class="al">{escape(y2label)}</text>'
        )
    legend, rows = _legend(series, ml, height - 12, width - mr)
    out.append(legend)
    if rows > 1:  # grow the picture downwards for the extra legend rows
        extra = 14 * (rows - 1)
        out[0] = out[0].replace(f'0 0 {width} {height}"', f'0 0 {width} {height + extra}"')
        out[0] = out[0].replace(f'height="{height}"', f'height="{height + extra}"')
        out[2] = out[2].replace(f'height="{height}"', f'height="{height + extra}"')
    if not any(pts.values()):
        out.append(
            f'<text x="{width / 2:.0f}" y="{height / 2:.0f}" text-anchor="middle" class="al">'
            "no data</text>"
        )
    out.append("</svg>")
    return "".join(out)


def _draw(
    s: Series, pts: list[tuple[float, float]], xa: _Axis, ya: _Axis, n_bars: int
) -> list[str]:
    if not pts:
        return []
    col = escape(s.color)
    dash = ' stroke-dasharray="5 3"' if s.dash else ""
    if s.kind == "points":
        out = [
            f'<polyline fill="none" stroke="{col}" stroke-width="1.2" stroke-opacity="0.6"{dash} '
            f'points="{" ".join(f"{xa.map(x):.1f},{ya.map(y):.1f}" for x, y in pts)}"/>'
        ]
        labels = list(s.point_labels or [])
        for i, (x, y) in enumerate(pts):
            px, py = xa.map(x), ya.map(y)
            out.append(f'<circle cx="{px:.1f}" cy="{py:.1f}" r="3.5" fill="{col}"/>')
            if i < len(labels) and labels[i]:
                near_right = px > xa.px1 - 50
                anchor = ' text-anchor="end"' if near_right else ""
                lx = px - 5 if near_right else px + 5
                out.append(
                    f'<text x="{lx:.1f}" y="{py - 6:.1f}"{anchor} class="tk">{escape(labels[i])}</text>'
                )
        return out
    if s.kind == "bars":
        xs = sorted({p[0] for p in pts})
        step = min((b - a for a, b in itertools.pairwise(xs)), default=1.0) or 1.0
        base = list(s.base) if s.base is not None else [0.0] * len(s.ys)
        out = []
        for x, y, b in zip(s.xs, s.ys, base, strict=False):
            if not y or not math.isfinite(y):
                continue
            xl, xr = xa.map(x - step * 0.45), xa.map(x + step * 0.45)
            yt, yb = ya.map(b + y), ya.map(b)
            out.append(
                f'<rect x="{xl:.1f}" y="{yt:.1f}" width="{max(xr - xl, 0.8):.1f}" '
                f'height="{max(yb - yt, 0.5):.1f}" fill="{col}"/>'
            )
        return out
    coords: list[str] = []
    prev_y: float | None = None
    for x, y in pts:
        px, py = xa.map(x), ya.map(y)
        if s.kind == "step" and prev_y is not None:
            coords.append(f"{px:.1f},{prev_y:.1f}")
        coords.append(f"{px:.1f},{py:.1f}")
        prev_y = py
    return [
        f'<polyline fill="none" stroke="{col}" stroke-width="1.8"{dash} '
        f'stroke-linejoin="round" points="{" ".join(coords)}"/>'
    ]


def _legend(series: Sequence[Series], x: float, y: float, xmax: float) -> tuple[str, int]:
    """Legend entries left to right, wrapping onto more rows; returns (svg, rows)."""
    out = []
    cx, row = x, 0
    for s in series:
        if not s.label:
            continue
        w = 26 + 6.2 * len(s.label)
        if cx + w > xmax and cx > x:
            cx, row = x, row + 1
        ly = y + 14 * row
        dash = ' stroke-dasharray="5 3"' if s.dash else ""
        out.append(
            f'<line x1="{cx:.0f}" x2="{cx + 16:.0f}" y1="{ly - 4}" y2="{ly - 4}" '
            f'stroke="{escape(s.color)}" stroke-width="{6 if s.kind == "bars" else 2.5}"{dash}/>'
            f'<text x="{cx + 20:.0f}" y="{ly}" class="lg">{escape(s.label)}</text>'
        )
        cx += w
    return "".join(out), row + 1
