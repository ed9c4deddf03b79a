"""The comparison section of the HTML page: overview, per-level tables, overlaid CDFs."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from infersight.report.compare.rows import (
    CALL_CLASS,
    CompareRow,
    delta,
    fmt_delta,
    matched_rows,
    unmatched_levels,
)
from infersight.report.plots import compare_cdf_charts
from infersight.report.sections import banner, fmt_cell, verdicts_html
from infersight.report.view import RunView
from infersight.stats.significance import (
    DEFAULT_DELTA,
    P99_MIN_REQUESTS,
    MetricCall,
    confidence_text,
)

__all__ = ["OVERVIEW_METRICS", "call_text", "comparison_html", "threshold_text"]

#: Metrics of the one-line-per-level overview (the full list is in each level's table).
OVERVIEW_METRICS = (
    "output tok/s",
    "success rate",
    "TTFT p99",
    "ITL p99",
    "e2e p99",
    "$ per Mtok out",
)


def threshold_text(threshold: float, comparisons: int = 1) -> str:
    """How the calls are made, in one paragraph (HTML and Markdown share it)."""
    return (
        "Levels are compared only with the level of the same load and workload. A "
        "percentile's B/A gets a bootstrap interval over requests; a rate's, an interval "
        "over 10 time slices of each run's steady window (with bench --repeat, each run "
        "is one unit; Fieller, Welch's t). Intervals are at "
        f"{confidence_text(comparisons)}. Within "
        f"±{threshold * 100:.3g}% it is no significant difference; wholly beyond it, better "
        f"or worse; otherwise inconclusive: run more. A p99 is called only with "
        f"{P99_MIN_REQUESTS:,} requests a side; an unsustainable level's latency is not "
        "compared. Rows without a call (success rate, cost, utilisation) show the change "
        "only."
    )


def call_text(c: MetricCall) -> str:
    """``no significant difference (B/A 0.99 [0.97, 1.02])``."""
    return f"{c.call} (B/A {c.interval_text()})"


def _delta_cells(
    row: CompareRow, i: int, base: float | None, val: float | None
) -> tuple[str, str, str]:
    d, pct = delta(base, val)
    c = row.call(i)
    cls = "" if c is None else CALL_CLASS.get(c.call, "unsure")
    ptxt = "-" if pct is None else f"{pct:+.1f}%"
    return cls, escape(fmt_delta(d, row.unit)), escape(ptxt)


def _call_cell(c: MetricCall | None) -> str:
    if c is None:
        return "<td class=muted>-</td>"
    cls = CALL_CLASS.get(c.call, "unsure")
    note = f'<br><small class="muted">{escape(c.note)}</small>' if c.note else ""
    return (
        f'<td class="{cls}">{escape(c.call)}<br><small>B/A {escape(c.interval_text())}'
        f"</small>{note}</td>"
    )


def _level_table(views: Sequence[RunView], rows: list[CompareRow]) -> str:
    head = f"<th>metric</th><th>{escape(views[0].label)}</th>" + "".join(
        f"<th>{escape(v.label)}</th><th>Δ</th><th>Δ%</th><th>call (B/A, interval)</th>"
        for v in views[1:]
    )
    body = []
    for row in rows:
        base = row.values[0]
        cells = [f"<td>{escape(row.metric)}</td><td class=num>{fmt_cell(base, row.unit)}</td>"]
        for i, val in enumerate(row.values[1:], start=1):
            cls, dtxt, ptxt = _delta_cells(row, i, base, val)
            cells.append(
                f"<td class=num>{fmt_cell(val, row.unit)}</td>"
                f'<td class="num {cls}">{dtxt}</td><td class="num {cls}">{ptxt}</td>'
                + _call_cell(row.call(i))
            )
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f'<div class="wide"><table><tr>{head}</tr>{"".join(body)}</table></div>'


def _overview(views: Sequence[RunView], levels: list[tuple[str, list[CompareRow]]]) -> str:
    """One row per level, the headline metrics of every run with their change."""
    per_level = [(level, {r.metric: r for r in rows}) for level, rows in levels]
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
            for i, val in enumerate(row.values[1:], start=1):
                cls, _, ptxt = _delta_cells(row, i, base, val)
                c = row.call(i)
                tip = f' title="{escape(call_text(c))}"' if c is not None else ""
                cells.append(
                    f'<td class="num {cls}"{tip}>{fmt_cell(val, row.unit)} '
                    f"<small>({ptxt})</small></td>"
                )
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f'<h2>Overview</h2><div class="wide"><table>{head1}{head2}{"".join(body)}</table></div>'


def comparison_html(views: Sequence[RunView], *, threshold: float = DEFAULT_DELTA) -> str:
    """Before/after tables (baseline = first run) with each change's call, and CDFs."""
    out = ['<section id="comparison"><h1>Comparison</h1>']
    out.append(
        f"<p>Baseline: <b>{escape(views[0].label)}</b>. Green is better, red is worse, "
        f"grey is no significant difference, yellow is inconclusive. "
        f"{escape(threshold_text(threshold, len(views) - 1))}</p>"
    )
    out.extend(banner(v, named=True) for v in views)
    matched = matched_rows(views, threshold=threshold)
    out.extend(f'<div class="banner warn">{escape(line)}</div>' for line in unmatched_levels(views))
    if len(matched) > 1:
        out.append(_overview(views, [(name, rows) for name, _, rows in matched]))
    for i, (level, levels, rows) in enumerate(matched):
        # Long sweeps: open the lightest and heaviest level, fold the ones between.
        is_open = len(matched) <= 3 or i in (0, len(matched) - 1)
        charts = "".join(compare_cdf_charts(views, levels, level))
        out.append(
            f"<details{' open' if is_open else ''}><summary><h2 class=inline>Level "
            f"{escape(level)}</h2></summary>{_level_table(views, rows)}"
            f'<div class="charts">{charts}</div></details>'
        )
    out.append("<h2>Verdicts side by side</h2>")
    for v in views:
        out.append(f"<h3>{escape(v.label)}</h3>{verdicts_html(v)}")
    out.append("</section>")
    return "".join(out)
