"""``report A B`` on the terminal: for each level, whether each change is real."""

from __future__ import annotations

from collections.abc import Sequence

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from infersight.core.records import RunResult
from infersight.report.compare.rows import matched_rows, unmatched_levels
from infersight.report.svg.charts import fmt_value
from infersight.report.view import build_views
from infersight.stats.significance import (
    BETTER,
    DEFAULT_DELTA,
    SAME,
    WORSE,
    confidence_text,
    family_confidence,
)

__all__ = ["render_comparison"]

_STYLE = {BETTER: "green", WORSE: "red", SAME: "dim"}


def render_comparison(
    results: Sequence[RunResult],
    console: Console,
    *,
    labels: Sequence[str] | None = None,
    threshold: float = DEFAULT_DELTA,
) -> None:
    """One table per level and run after the baseline (the first result): each
    metric's B/A, its interval (95%, wider with several runs) and the call
    (docs/design.md section 2)."""

    views = build_views(results, labels)
    base = views[0]
    pct = f"{family_confidence(len(views) - 1) * 100:.4g}%"
    for level, _, rows in matched_rows(views, threshold=threshold):
        for i, view in enumerate(views[1:], start=1):
            table = Table(
                title=f"{escape(view.label)} against {escape(base.label)} · level {escape(level)}",
                title_justify="left",
                box=box.SIMPLE_HEAD,
                pad_edge=False,
            )
            for col in ("metric", base.label, view.label, f"B/A [{pct}]", "call"):
                table.add_column(
                    escape(col), justify="left" if col in ("metric", "call") else "right"
                )
            notes = []
            for row in rows:
                c = row.call(i)
                if c is None:
                    continue
                shown = [
                    fmt_value(v, row.unit) if v is not None else "-"
                    for v in (row.values[0], row.values[i])
                ]
                style = _STYLE.get(c.call, "yellow")
                table.add_row(
                    escape(row.metric),
                    *shown,
                    escape(c.interval_text()),
                    f"[{style}]{escape(c.call)}[/]",
                )
                if c.note:
                    notes.append(f"{row.metric}: {c.note}")
            console.print(table)
            for note in dict.fromkeys(notes):
                console.print(f"[dim]  {escape(note)}[/]", highlight=False)
    for line in unmatched_levels(views):
        console.print(f"[yellow]{escape(line)}[/]", highlight=False)
    console.print(
        f"[dim]calls: B/A's interval ({escape(confidence_text(len(views) - 1))}) within "
        f"±{threshold * 100:.3g}% is no significant "
        "difference, wholly beyond it better or worse, otherwise inconclusive[/]"
    )
