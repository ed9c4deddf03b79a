"""The data of the report's SVG charts: series, shaded bands and the palette."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["PALETTE", "Band", "Series"]

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
