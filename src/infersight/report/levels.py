"""The report's load-level table and what each level's figures cover.

Beside every level: how many requests were sent and how many the statistics describe
(the window chooses by intended send time), whether the window is a steady state, and
whether an open-loop level was sustainable (docs/design.md section 2). The words come from
:func:`infersight.stats.aggregate.level_notes`, as in the console table.
"""

from __future__ import annotations

import math
from html import escape
from typing import Any

from infersight.core.numbers import number_at
from infersight.report.md_text import md_cell
from infersight.report.svg.charts import fmt_value
from infersight.report.view import LevelView, RunView
from infersight.stats.level_flags import level_notes, level_state

__all__ = ["fmt_cell", "level_notes_html", "level_notes_md", "summary_table"]


def fmt_cell(v: Any, unit: str = "") -> str:
    """Escaped table cell text for a number (or '-')."""
    if isinstance(v, bool) or v is None:
        return "-" if v is None else str(v)
    if isinstance(v, int | float):
        if not math.isfinite(v):
            return "-"
        if unit == "$":
            return f"${v:,.4g}" if abs(v) < 1000 else f"${v:,.0f}"
        if unit == "int":
            return f"{int(v):,}"
        return escape(fmt_value(float(v), unit))
    return escape(str(v))


def _row(lv: LevelView) -> str:
    a = lv.agg
    req = a.get("requests") or {}
    state = level_state(a)
    cls = ' class="bad"' if state == "unsustainable" else ""
    lat = "".join(
        f"<td class=num>{fmt_cell(number_at(a, m, q), 's')}</td>"
        for m, q in (
            ("ttft", "p50"),
            ("ttft", "p99"),
            ("itl", "p50"),
            ("itl", "p99"),
            ("e2e", "p99"),
        )
    )
    return (
        f"<tr{cls}><td>{escape(lv.name)}</td>"
        f"<td class=num>{fmt_cell(req.get('total'), 'int')}</td>"
        f"<td class=num>{fmt_cell(req.get('in_window'), 'int')}</td>"
        f"<td class=num>{fmt_cell(req.get('ok'), 'int')}</td>"
        f"<td class=num>{fmt_cell(req.get('errors'), 'int')}</td>"
        f"<td class=num>{fmt_cell(a.get('success_rate'), 'frac')}</td>"
        f"<td class=num>{fmt_cell(a.get('request_throughput'))}</td>"
        f"<td class=num>{fmt_cell(a.get('output_token_throughput'))}</td>"
        f"<td class=num>{fmt_cell(a.get('goodput'))}</td>{lat}"
        f"<td>{'<b>UNSUSTAINABLE</b>' if state == 'unsustainable' else escape(state)}</td>"
        f"<td class=muted>{escape(str((a.get('window') or {}).get('method') or ''))}</td></tr>"
    )


def summary_table(view: RunView) -> str:
    """One row per level: requests sent and in the statistics, rates, latency, state."""
    head = (
        "<tr><th>level</th><th>sent</th><th>in stats</th><th>ok</th><th>errors</th>"
        "<th>success</th><th>req/s</th><th>output tok/s</th><th>goodput req/s</th>"
        "<th>TTFT p50</th><th>TTFT p99</th><th>ITL p50</th><th>ITL p99</th><th>e2e p99</th>"
        "<th>state</th><th>window</th></tr>"
    )
    rows = "".join(_row(lv) for lv in view.levels)
    return (
        f'<div class="wide"><table>{head}{rows}</table></div>'
        '<p class="muted">Latency covers the requests <i>sent</i> inside each level\'s '
        "window (in stats), however late they finished; throughput counts completions "
        "until those requests drained.</p>"
    )


def level_notes_html(view: RunView) -> str:
    """Banners for unsustainable levels, then what each level's statistics cover."""
    out = []
    for lv in view.levels:
        for kind, text in level_notes(lv.name, lv.agg):
            if kind == "unsustainable":
                out.append(f'<div class="banner bad"><b>Unsustainable:</b> {escape(text)}</div>')
            elif kind == "invalid":
                out.append(f'<div class="banner warn">{escape(text)}</div>')
            else:
                out.append(f'<p class="muted">{escape(text)}</p>')
    return "".join(out)


def level_notes_md(view: RunView) -> list[str]:
    """The same notes as Markdown lines (a warning block per unsustainable level)."""
    out: list[str] = []
    for lv in view.levels:
        for kind, text in level_notes(lv.name, lv.agg):
            if kind == "unsustainable":
                out += ["> [!WARNING]", f"> **Unsustainable**: {text}", ""]
            elif kind == "invalid":
                out += [f"> {md_cell(text)}", ""]
            else:
                out += [f"_{text}_", ""]
    return out
