"""The fleet diagnosis as one self-contained HTML page: the headline, a verdict timeline
(one row per replica), the replicas table, the worst windows, the load-imbalance
verdicts and each replica's verdicts with their evidence. Inline CSS and SVG only."""

from __future__ import annotations

from html import escape

from infersight.core.fleet import FleetReport, ReplicaDiagnosis
from infersight.core.verdicts import Verdict
from infersight.report.fleet.console import (
    REPLICA_COLUMNS,
    clock,
    fmt_num,
    replica_cells,
    span_text,
)
from infersight.report.html import html_page
from infersight.report.verdicts.html import verdict_box

__all__ = ["render_fleet_html", "timeline_svg"]

#: Verdict colours (Okabe-Ito based): waiting in warm colours, room in cool ones.
COLOURS = {
    "slot_bound": "#D55E00",
    "kv_bound": "#CC79A7",
    "capacity": "#E69F00",
    "under_loaded": "#56B4E9",
    "busy_illusion": "#0072B2",
    "host_starved": "#999933",
    "healthy": "#009E73",
    "error_driven": "#c0392b",
    "bandwidth_bound_decode": "#7fbfbf",
    "compute_bound_prefill": "#7f7fbf",
    "load_imbalance": "#000000",
}
_ROW, _LEFT, _WIDTH = 22, 190, 1060


def _bar(v: Verdict, x0: float, scale: float, y: int) -> str:
    x = _LEFT + (v.window.start - x0) * scale
    w = max(1.0, (v.window.end - v.window.start) * scale)
    colour = COLOURS.get(v.id, "#888888")
    return (
        f'<rect x="{x:.1f}" y="{y + 3}" width="{w:.1f}" height="{_ROW - 6}" fill="{colour}">'
        f"<title>{escape(v.title)}: "
        f"{escape(span_text(v.window.start, v.window.end))}</title></rect>"
    )


def timeline_svg(report: FleetReport) -> str:
    """One row per replica: its main verdict per window, coloured; imbalance on top."""
    rows: list[tuple[str, list[Verdict]]] = []
    if report.balance:
        rows.append(("load imbalance", report.balance))
    for rd in report.replicas:
        # one bar per window span: the most actionable verdict drawn last (on top)
        rows.append(
            (rd.replica.id, sorted(rd.verdicts, key=lambda v: v.id == "healthy", reverse=True))
        )
    span = max(1e-9, report.end - report.start)
    scale = (_WIDTH - _LEFT - 10) / span
    h = _ROW * len(rows) + 40
    parts = [
        f'<svg class="plot fleet" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {_WIDTH} {h}" '
        f'width="{_WIDTH}" height="{h}" role="img" aria-label="verdict timeline">'
    ]
    for i, (name, verdicts) in enumerate(rows):
        y = 10 + i * _ROW
        label = name if len(name) <= 28 else name[:27] + "…"
        parts.append(
            f'<text class="tk" x="{_LEFT - 6}" y="{y + 15}" '
            f'text-anchor="end">{escape(label)}</text>'
        )
        parts.extend(_bar(v, report.start, scale, y) for v in verdicts)
    y_axis = 10 + len(rows) * _ROW + 14
    for k in range(5):
        t = report.start + span * k / 4
        x = _LEFT + (t - report.start) * scale
        anchor = "start" if k == 0 else "end" if k == 4 else "middle"
        parts.append(
            f'<text class="tk" x="{x:.1f}" y="{y_axis}" text-anchor="{anchor}">'
            f"{escape(clock(t, with_date=False))}</text>"
        )
    parts.append("</svg>")
    used = sorted({v.id for _, vs in rows for v in vs}, key=list(COLOURS).index)
    legend = " ".join(
        f'<span class="tag" style="border-left:10px solid {COLOURS[k]}">{escape(k)}</span>'
        for k in used
        if k in COLOURS
    )
    return "".join(parts) + f"<p>{legend} <span class=muted>(times UTC)</span></p>"


def _replicas_table(report: FleetReport) -> str:
    head = "".join(f"<th>{c}</th>" for c in (*REPLICA_COLUMNS, "sources"))
    rows = []
    for rd in report.replicas:
        rid, *cells = (escape(c) for c in replica_cells(rd))
        rows.append(
            f'<tr><td><a href="#r-{rid}">{rid}</a></td>'
            + "".join(f"<td>{c}</td>" for c in cells[:4])
            + "".join(f"<td class=num>{c}</td>" for c in cells[4:])
            + f"<td class=muted>{escape(', '.join(rd.replica.sources))}</td></tr>"
        )
    return f'<div class="wide"><table><tr>{head}</tr>{"".join(rows)}</table></div>'


def _worst_table(report: FleetReport) -> str:
    if not report.worst:
        return '<p class="muted">No window had requests waiting.</p>'
    rows = "".join(
        f"<tr><td>{escape(span_text(w.start, w.end))}</td><td>{escape(w.replica)}</td>"
        f"<td>{escape(w.title)}</td><td class=num>{fmt_num(w.waiting)}</td>"
        f"<td class=num>{fmt_num(w.queued_request_seconds, nd=0)}</td>"
        f"<td class=num>{escape(fmt_num(w.ttft_p99, 's'))}</td></tr>"
        for w in report.worst
    )
    return (
        "<table><tr><th>window</th><th>replica</th><th>verdict</th><th>waiting (mean)</th>"
        f"<th>queued request-seconds</th><th>TTFT p99</th></tr>{rows}</table>"
    )


def _replica_section(rd: ReplicaDiagnosis) -> str:
    r = rd.replica
    facts = " · ".join(
        x
        for x in (
            f"engine {r.engine}",
            f"model {r.model}",
            r.instance and f"instance {r.instance}",
            r.host and f"host {r.host}",
            f"GPUs {', '.join(r.gpus) or 'none joined'}",
        )
        if x
    )
    shown = [v for v in rd.verdicts if v.id != "healthy"] or rd.verdicts
    boxes = "".join(verdict_box(v, span_text(v.window.start, v.window.end)) for v in shown)
    return f'<h3 id="r-{escape(r.id)}">{escape(r.id)}</h3><p class="muted">{escape(facts)}</p>' + (
        boxes or '<p class="muted">No series in the range.</p>'
    )


def render_fleet_html(report: FleetReport) -> str:
    """The page for one fleet diagnosis."""
    title = f"infersight fleet diagnosis: {report.source}"
    head = "".join(f"<p><b>{escape(line)}</b></p>" for line in report.headline[1:])
    facts = (
        f'<div class="facts"><span>Prometheus <b>{escape(report.source)}</b></span>'
        f"<span>selector <b>{escape(report.selector or '(none)')}</b></span>"
        f"<span>{escape(span_text(report.start, report.end))}</span>"
        f"<span>step {report.step:g} s · windows of {report.window:g} s</span>"
        f"<span>{escape(report.headline[0] if report.headline else '')}</span></div>"
    )
    balance = "".join(
        verdict_box(v, span_text(v.window.start, v.window.end)) for v in report.balance
    )
    notes = "".join(f"<li>{escape(n)}</li>" for n in report.notes)
    body = (
        f"<h1>{escape(title)}</h1>{facts}"
        f'<div class="banner warn">{head or "No replica data."}</div>'
        f"<h2>Verdict timeline</h2>{timeline_svg(report)}"
        f"<h2>Replicas</h2>{_replicas_table(report)}"
        f"<h2>Worst windows</h2>{_worst_table(report)}"
        + (f"<h2>Load balance</h2>{balance}" if balance else "")
        + "<h2>Per replica</h2>"
        + "".join(_replica_section(rd) for rd in report.replicas)
        + (f"<h2>Notes</h2><ul>{notes}</ul>" if notes else "")
    )
    return html_page(title, body)
