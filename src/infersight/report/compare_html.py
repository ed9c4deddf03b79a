"""The comparison section of the HTML page: overview, per-level tables, overlaid CDFs."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from infersight.report.compare import (
    CompareRow,
    compare_levels,
    comparison_rows,
    delta,
    fmt_delta,
    judge,
)
from infersight.report.plots import compare_cdf_charts
from infersight.report.sections import banner, fmt_cell, verdicts_html
from infersight.report.view import LevelView, RunView

__all__ = ["OVERVIEW_METRICS", "comparison_html"]

#: Metrics of the one-line-per-level overview (the full list is in each level's table).
OVERVIEW_METRICS = (
    "output tok/s",
    "success rate",
    "TTFT p99",
    "ITL p99",
    "e2e p99",
    "$ per Mtok out",
)
#: Levels whose details are open by default: the first and the last (lightest, heaviest).
OPEN_LEVELS = 2


def _delta_cells(row: CompareRow, base: float | None, val: float | None) -> tuple[str, str, str]:
    d, pct = delta(base, val)
    cls = judge(row.better, base, val) or ""
    ptxt = "-" if pct is None else f"{pct:+.1f}%"
    return cls, escape(fmt_delta(d, row.unit)), escape(ptxt)


def _level_table(views: Sequence[RunView], rows: list[CompareRow]) -> str:
    head = f"<th>metric</th><th>{escape(views[0].label)}</th>" + "".join(
        f"<th>{escape(v.label)}</th><th>Δ</th><th>Δ%</th>" for v in views[1:]
    )
    body = []
    for row in rows:
        base = row.values[0]
        cells = [f"<td>{escape(row.metric)}</td><td class=num>{fmt_cell(base, row.unit)}</td>"]
        for val in row.values[1:]:
            cls, dtxt, ptxt = _delta_cells(row, base, val)
            cells.append(
                f"<td class=num>{fmt_cell(val, row.unit)}</td>"
                f'<td class="num {cls}">{dtxt}</td><td class="num {cls}">{ptxt}</td>'
            )
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f'<div class="wide"><table><tr>{head}</tr>{"".join(body)}</table></div>'


def _overview(views: Sequence[RunView], pairs: list[tuple[str, list[LevelView]]]) -> str:
    """One row per level, the headline metrics of every run with their change."""
    per_level = [(level, {r.metric: r for r in comparison_rows(m)}) for level, m in pairs]
    metrics = [m for m in OVERVIEW_METRICS if any(m in rows for _, rows in per_level)]
    n = len(views)
    head1 = (
        "<tr><th rowspan=2>level</th>"
        + "".join(f"<th colspan={n}>{escape(m)}</th>" for m in metrics)
        + "</tr>"
    )
    head2 = (
        "<tr>" + "".join(f"<th>{escape(v.label)}</th>" for _ in metrics for v in views) + "</tr>"
    )
    body = []
    for level, rows in per_level:
        cells = [f"<td>{escape(level)}</td>"]
        for m in metrics:
            row = rows.get(m)
            if row is None:
                cells.extend("<td class=num>-</td>" for _ in views)
                continue
            base = row.values[0]
            cells.append(f"<td class=num>{fmt_cell(base, row.unit)}</td>")
            for val in row.values[1:]:
                cls, _, ptxt = _delta_cells(row, base, val)
                cells.append(
                    f'<td class="num {cls}">{fmt_cell(val, row.unit)} <small>({ptxt})</small></td>'
                )
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f'<h2>Overview</h2><div class="wide"><table>{head1}{head2}{"".join(body)}</table></div>'


def comparison_html(views: Sequence[RunView]) -> str:
    """Before/after tables (baseline = first run) and overlaid CDFs."""
    out = ['<section id="comparison"><h1>Comparison</h1>']
    out.append(
        f"<p>Baseline: <b>{escape(views[0].label)}</b>. Deltas are against the baseline; "
        "green is better, red is worse (lower latency and cost, higher throughput and "
        "success are better); changes under 1% count as the same.</p>"
    )
    out.extend(banner(v, named=True) for v in views)
    pairs = compare_levels(views)
    if len(pairs) > 1:
        out.append(_overview(views, pairs))
    for i, (level, matched) in enumerate(pairs):
        # Long sweeps: open the lightest and heaviest level, fold the ones between.
        is_open = len(pairs) <= 3 or i in (0, len(pairs) - 1)
        charts = "".join(compare_cdf_charts(views, matched, level))
        out.append(
            f"<details{' open' if is_open else ''}><summary><h2 class=inline>Level "
            f"{escape(level)}</h2></summary>{_level_table(views, comparison_rows(matched))}"
            f'<div class="charts">{charts}</div></details>'
        )
    out.append("<h2>Verdicts side by side</h2>")
    for v in views:
        out.append(f"<h3>{escape(v.label)}</h3>{verdicts_html(v)}")
    out.append("</section>")
    return "".join(out)
