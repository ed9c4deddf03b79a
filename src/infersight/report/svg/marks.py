"""What the report's SVG charts draw on their axes: lines, steps, points, bars, legend."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from html import escape

from infersight.report.svg.axes import Axis
from infersight.report.svg.series import Series

__all__ = ["draw_series", "legend"]


def draw_series(s: Series, pts: list[tuple[float, float]], xa: Axis, ya: Axis) -> list[str]:
    if not pts:
        return []
    col = escape(s.color)
    dash = _dash(s)
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
                    f'<text x="{lx:.1f}" y="{py - 6:.1f}"{anchor} '
                    f'class="tk">{escape(labels[i])}</text>'
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


def _dash(s: Series) -> str:
    """A series' stroke pattern: dotted on the right axis, dashed when asked, else solid;
    so two lines on different axes never look alike, whatever their colours."""
    if s.right:
        return ' stroke-dasharray="2 3"'
    return ' stroke-dasharray="5 3"' if s.dash else ""


def legend(
    series: Sequence[Series], x: float, y: float, xmax: float, *, axes: bool = False
) -> tuple[str, int]:
    """Legend entries left to right, wrapping onto more rows; returns (svg, rows).
    ``axes``: the chart has two y axes, and each entry says which one is its own."""
    out = []
    cx, row = x, 0
    for s in series:
        if not s.label:
            continue
        label = s.label + ((", right axis" if s.right else ", left axis") if axes else "")
        w = 26 + 6.2 * len(label)
        if cx + w > xmax and cx > x:
            cx, row = x, row + 1
        ly = y + 14 * row
        out.append(
            f'<line x1="{cx:.0f}" x2="{cx + 16:.0f}" y1="{ly - 4}" y2="{ly - 4}" '
            f'stroke="{escape(s.color)}" '
            f'stroke-width="{6 if s.kind == "bars" else 2.5}"{_dash(s)}/>'
            f'<text x="{cx + 20:.0f}" y="{ly}" class="lg">{escape(label)}</text>'
        )
        cx += w
    return "".join(out), row + 1
