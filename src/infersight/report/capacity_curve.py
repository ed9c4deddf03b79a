"""The run's capacity curve and its one recommendation, as every output shows them
(docs/design.md sections 2 and 5): the fix with what it predicts and rests on, one row
per level (in flight, throughput, TPOT, TTFT, the queue, time in the engine) with the
knee and the best operating point marked, and the chart of throughput and TPOT against
the requests in flight.
"""

from __future__ import annotations

import math
from html import escape
from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape as rich_escape
from rich.table import Table

from infersight.core.curve import CapacityCurve, CurvePoint, Recommendation
from infersight.report.svg.axes import fmt_value
from infersight.report.svg.charts import Series, chart

__all__ = [
    "advice_lines",
    "curve_html",
    "curve_markdown",
    "print_curve",
]

HEAD = (
    "level",
    "in flight",
    "req/s",
    "out tok/s",
    "TPOT p50",
    "TTFT p50",
    "TTFT p99",
    "queue",
    "time in engine",
    "state",
    "",
)


def advice_lines(rec: Recommendation) -> list[tuple[str, str]]:
    """(label, text): the fix, what it is expected to do and what that rests on."""
    out = [("fix", rec.text)]
    p = rec.predicted
    parts = [
        f"{name} about "
        f"{fmt_value(v, unit) if unit else format(v, '.3g')}{' req/s' if not unit else ''}"
        for name, key, unit in (
            ("throughput", "throughput", ""),
            ("TTFT p50", "ttft_p50", "s"),
            ("TTFT p99", "ttft_p99", "s"),
            ("TPOT p50", "tpot_p50", "s"),
        )
        if (v := p.get(key))
    ]
    if parts:
        how = (
            " (an estimate: it goes beyond what the run measured; see what it rests on)"
            if rec.basis == "estimate"
            else ""
        )
        out.append(("expected after the fix", ", ".join(parts) + how))
    if rec.rests_on:
        out.append(("rests on", rec.rests_on))
    if rec.disagrees:
        out.append(("disagrees", rec.disagrees))
    return out


def _n(v: float | None, unit: str = "") -> str:
    if v is None or not math.isfinite(v):
        return "-"
    return fmt_value(v, unit) if unit else f"{v:.3g}"


def _inflight(p: CurvePoint) -> str:
    if p.inflight is None:
        return "-"
    if p.inflight_source == "engine" and p.client_inflight and p.client_inflight > 1.2 * p.inflight:
        return f"{p.inflight:.3g} of {p.client_inflight:.3g}"  # running of those in flight
    return f"{p.inflight:.3g}"


def _state(p: CurvePoint) -> str:
    if p.sustainable is False:
        return "unsustainable"
    return "client-limited" if p.client_limited else ("steady" if p.steady else "no steady state")


def curve_rows(curve: CapacityCurve) -> list[list[str]]:
    """One row of text cells per level, in the order of :data:`HEAD`."""
    rows = []
    for p in curve.points:
        mark = [
            m
            for m, hit in (
                ("knee", p.level == curve.knee_level),
                ("plateau", p.level == curve.plateau_level and p.level != curve.knee_level),
                ("best", p.level == curve.best_level),
            )
            if hit
        ]
        rows.append(
            [
                p.level,
                _inflight(p),
                _n(p.throughput),
                _n(p.token_throughput),
                _n(p.tpot_p50, "s"),
                _n(p.ttft_p50, "s"),
                _n(p.ttft_p99, "s"),
                _n(p.queue),
                _n(p.time_in_engine, "s"),
                _state(p),
                ", ".join(mark),
            ]
        )
    return rows


def knee_text(curve: CapacityCurve) -> str:
    """``measured knee: 4 in flight (c=4), compute-bound past it`` or why there is none."""
    if curve.knee_reached and curve.knee is not None:
        return (
            f"measured knee: {curve.knee:.3g} in flight ({curve.knee_level}); past it "
            "throughput grows less than 10% per doubling while TPOT or the time in the "
            "engine grows (compute)"
        )
    above = f" (above {curve.above:.3g} in flight)" if curve.above else ""
    if curve.plateau == "admission" and curve.plateau_at:
        return (
            f"knee not reached{above}; throughput is flat from {curve.plateau_level} with "
            f"TPOT flat and TTFT growing: an admission limit at about "
            f"{curve.plateau_at:.3g} running (slots or a scheduler budget)"
        )
    return f"knee not reached{above}"


def print_curve(curve: CapacityCurve, console: Console) -> None:
    """The level table the advice comes from, for ``infersight diagnose``."""

    table = Table(
        title="capacity curve (one row per level)",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    for i, h in enumerate(HEAD):
        table.add_column(h, justify="left" if i in (0, 9, 10) else "right", no_wrap=True)
    for row in curve_rows(curve):
        table.add_row(*(rich_escape(c) for c in row))
    console.print(table)
    console.print(f"[dim]{rich_escape(knee_text(curve))}[/]", highlight=False)


def curve_chart(curve: CapacityCurve) -> str:
    """Throughput (left) and TPOT (right) against requests running, the knee marked."""
    pts = [p for p in curve.points if p.inflight]
    xs = [float(p.inflight or 0.0) for p in pts]
    mark = curve.knee_level if curve.knee_reached else curve.plateau_level
    what = "knee" if curve.knee_reached else f"{curve.plateau or 'plateau'} limit"
    labels = [f"{p.level} ({what})" if p.level == mark else p.level for p in pts]
    series = [
        Series(
            "throughput (req/s)",
            xs,
            [p.throughput or math.nan for p in pts],
            kind="points",
            point_labels=labels,
        ),
        Series(
            "TPOT p50",
            xs,
            [p.tpot_p50 or math.nan for p in pts],
            "#D55E00",
            kind="points",
            dash=True,
            right=True,
        ),
    ]
    at = next((p for p in pts if p.level == mark), None)
    if at is not None and at.throughput:
        name = "measured knee" if curve.knee_reached else what
        series.append(
            Series(
                f"{name} ({at.level})",
                [float(at.inflight or 0.0)],
                [at.throughput],
                "#000000",
                kind="points",
            )
        )
    return chart(
        series,
        title="Capacity curve: throughput and TPOT against work in flight",
        xlabel="requests running (in flight)",
        ylabel="req/s",
        y2label="TPOT",
        y2unit="s",
    )


def curve_html(curve: CapacityCurve | None) -> str:
    """The chart, the table and how the curve was read."""
    if curve is None:
        return '<p class="muted">No capacity curve: the run has no load levels.</p>'
    head = "".join(f"<th>{escape(h)}</th>" for h in HEAD)
    body = "".join(
        "<tr>"
        + "".join(
            f"<td{' class=num' if 0 < i < 9 else ''}>{escape(c)}</td>" for i, c in enumerate(r)
        )
        + "</tr>"
        for r in curve_rows(curve)
    )
    notes = "".join(f"<li>{escape(n)}</li>" for n in curve.notes)
    return (
        f'<div class="charts">{curve_chart(curve)}</div>'
        f"<p>{escape(knee_text(curve))}</p><table><tr>{head}</tr>{body}</table>"
        + (f'<ul class="muted">{notes}</ul>' if notes else "")
    )


def curve_markdown(curve: CapacityCurve | None, cell: Any) -> list[str]:
    """The curve's table for the Markdown summary (``cell`` escapes a table cell)."""
    if curve is None:
        return []
    out = [
        "**Capacity curve**",
        "",
        "| " + " | ".join(HEAD[:-1]) + " | mark |",
        "|---|" + "---:|" * 8 + "---|---|",
    ]
    out += ["| " + " | ".join(cell(c) for c in r) + " |" for r in curve_rows(curve)]
    return [*out, "", cell(knee_text(curve)), ""]
