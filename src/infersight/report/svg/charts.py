"""Small, dependency-free SVG charts for the self-contained HTML report.

Hand-made SVG keeps the report one file with no scripts, fonts or images to fetch,
renders in milliseconds, and stays a few kilobytes per chart because callers pass
already downsampled data (quantile CDFs, binned timelines). The scales live in
``svg.axes``, the marks (lines, points, bars, legend) in ``svg.marks``; this module
lays out one chart.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from infersight.report.svg.axes import (
    Axis,
    finite_points,
    fmt_value,
    log_ticks,
    nice_ticks,
    value_range,
)
from infersight.report.svg.marks import draw_series, legend
from infersight.report.svg.series import PALETTE, Band, Series

__all__ = ["PALETTE", "Band", "Series", "chart", "fmt_value", "nice_ticks"]

Points = dict[int, list[tuple[float, float]]]


@dataclass(frozen=True)
class _Frame:
    """The picture's size and the margins around its plot area."""

    width: int
    height: int
    ml: int
    mr: int
    mt: int = 30
    mb: int = 58


def _points(series: Sequence[Series], xlog: bool, ylog: bool) -> Points:
    """Each series' drawable points, by ``id``; stacked bars are drawn at their tops."""
    pts = {id(s): finite_points(s.xs, s.ys, xlog, ylog and not s.right) for s in series}
    for s in series:
        if s.kind == "bars" and s.base is not None:
            tops = [b + y for b, y in zip(s.base, s.ys, strict=False)]
            pts[id(s)] = finite_points(s.xs, tops, xlog, False)
    return pts


def _axes(
    series: Sequence[Series],
    pts: Points,
    bands: Sequence[Band],
    f: _Frame,
    *,
    xlog: bool,
    ylog: bool,
    ymax: float | None,
) -> tuple[Axis, Axis]:
    left = [p for s in series if not s.right for p in pts[id(s)]]
    xs_all = [p[0] for s in series for p in pts[id(s)]] + [v for b in bands for v in (b.x0, b.x1)]
    x0, x1 = value_range(xs_all, xlog, zero=False)
    if any(s.kind == "points" for s in series) and not xlog:
        pad = (x1 - x0) * 0.06  # room for the end points' labels
        x0, x1 = (max(0.0, x0 - pad) if x0 >= 0 else x0 - pad), x1 + pad
    y0, y1 = value_range([p[1] for p in left], ylog, zero=True)
    if ymax is not None:
        y1 = max(y1, ymax) if not left else max(min(y1, ymax), y0 + 1e-12)
    xa = Axis(x0, x1, xlog, f.ml, f.width - f.mr)
    ya = Axis(y0, y1 * (1 if ylog else 1.05), ylog, f.height - f.mb, f.mt)
    xa.ticks = log_ticks(x0, x1) if xlog else nice_ticks(x0, x1, 6)
    ya.ticks = log_ticks(ya.lo, ya.hi) if ylog else nice_ticks(ya.lo, ya.hi, 5)
    return xa, ya


def _bands(bands: Sequence[Band], xa: Axis, f: _Frame) -> list[str]:
    out = []
    for i, b in enumerate(bands):
        bx0, bx1 = xa.map(b.x0), xa.map(b.x1)
        fill = "#f2f5fa" if i % 2 == 0 else "#e6ebf3"
        out.append(
            f'<rect x="{bx0:.1f}" y="{f.mt}" width="{max(bx1 - bx0, 0.5):.1f}" '
            f'height="{f.height - f.mb - f.mt}" fill="{fill}"/>'
        )
        if b.label and bx1 - bx0 > 6.0 * len(b.label):  # skip labels that do not fit
            out.append(
                f'<text x="{(bx0 + bx1) / 2:.1f}" y="{f.mt + 10}" text-anchor="middle" '
                f'class="bl">{escape(b.label)}</text>'
            )
    return out


def _grid(xa: Axis, ya: Axis, f: _Frame, xunit: str, yunit: str) -> list[str]:
    out = []
    for t in ya.ticks:
        y = ya.map(t)
        out.append(
            f'<line x1="{f.ml}" x2="{f.width - f.mr}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>'
        )
        out.append(
            f'<text x="{f.ml - 5}" y="{y + 3:.1f}" text-anchor="end" class="tk">'
            f"{escape(fmt_value(t, yunit))}</text>"
        )
    for t in xa.ticks:
        x = xa.map(t)
        out.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{f.mt}" y2="{f.height - f.mb}" class="grid"/>'
        )
        out.append(
            f'<text x="{x:.1f}" y="{f.height - f.mb + 14}" text-anchor="middle" class="tk">'
            f"{escape(fmt_value(t, xunit))}</text>"
        )
    return out


def _right_axis(
    right: list[tuple[float, float]], f: _Frame, y2unit: str
) -> tuple[Axis | None, list[str]]:
    """The secondary y axis of the ``right`` series' points, and its tick labels."""
    if not right:
        return None, []
    r0, r1 = value_range([p[1] for p in right], False, zero=True)
    ra = Axis(r0, r1 * 1.05, False, f.height - f.mb, f.mt, nice_ticks(r0, r1 * 1.05, 5))
    ticks = [
        f'<text x="{f.width - f.mr + 5}" y="{ra.map(t) + 3:.1f}" class="tk">'
        f"{escape(fmt_value(t, y2unit))}</text>"
        for t in ra.ticks
    ]
    return ra, ticks


def _axis_labels(f: _Frame, xlabel: str, ylabel: str, y2label: str) -> list[str]:
    mid_y = (f.mt + f.height - f.mb) / 2
    out = [
        f'<text x="{(f.ml + f.width - f.mr) / 2:.0f}" y="{f.height - f.mb + 30}" '
        f'text-anchor="middle" class="al">{escape(xlabel)}</text>',
        f'<text transform="translate(13,{mid_y:.0f}) rotate(-90)" '
        f'text-anchor="middle" class="al">{escape(ylabel)}</text>',
    ]
    if y2label:
        out.append(
            f'<text transform="translate({f.width - 6},{mid_y:.0f}) rotate(-90)" '
            f'text-anchor="middle" class="al">{escape(y2label)}</text>'
        )
    return out


def _open(title: str, f: _Frame, extra: int) -> list[str]:
    """The ``<svg>`` element, title and background; ``extra`` rows grow it downwards."""
    w, h = f.width, f.height + extra
    return [
        f'<svg class="plot" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}" '
        f'width="{w}" height="{h}" role="img" aria-label="{escape(title)}">',
        f"<title>{escape(title)}</title>",
        f'<rect x="0" y="0" width="{w}" height="{h}" fill="#fff"/>',
        f'<text x="{w / 2:.0f}" y="18" text-anchor="middle" class="pt">{escape(title)}</text>',
    ]


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
    f = _Frame(width, height, ml=62, mr=58 if any(s.right for s in series) else 16)
    pts = _points(series, xlog, ylog)
    xa, ya = _axes(series, pts, bands, f, xlog=xlog, ylog=ylog, ymax=ymax)
    right = [p for s in series if s.right for p in pts[id(s)]]
    ra, right_ticks = _right_axis(right, f, y2unit)
    body = [*_bands(bands, xa, f), *_grid(xa, ya, f, xunit, yunit), *right_ticks]
    body.append(
        f'<rect x="{f.ml}" y="{f.mt}" width="{width - f.ml - f.mr}" '
        f'height="{height - f.mt - f.mb}" fill="none" stroke="#888"/>'
    )
    for s in series:
        body.extend(draw_series(s, pts[id(s)], xa, ra if s.right and ra else ya))
    body.extend(_axis_labels(f, xlabel, ylabel, y2label if right else ""))
    two_axes = ra is not None and any(not s.right for s in series)
    marks, rows = legend(series, f.ml, height - 12, width - f.mr, axes=two_axes)
    body.append(marks)
    if not any(pts.values()):
        body.append(
            f'<text x="{width / 2:.0f}" y="{height / 2:.0f}" text-anchor="middle" class="al">'
            "no data</text>"
        )
    # More legend rows than one grow the picture downwards.
    return "".join([*_open(title, f, 14 * (rows - 1)), *body, "</svg>"])
