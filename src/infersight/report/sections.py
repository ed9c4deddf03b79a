"""HTML sections for one run: banner, verdicts, tables, charts, identity, notes.

Every user-controlled string (model names, labels, error messages, config values) goes
through ``html.escape`` here; nothing from a RunResult is ever inserted raw.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from html import escape
from typing import Any

from infersight.core.verdicts import Verdict
from infersight.report.capacity_curve import curve_html
from infersight.report.cdf import PERCENTILES
from infersight.report.floors_table import floors_html
from infersight.report.headline.html import headline_html
from infersight.report.levels import fmt_cell, level_notes_html, summary_table
from infersight.report.model_lines import model_html
from infersight.report.physics_html import physics_html
from infersight.report.plots import cdf_charts, throughput_latency_charts, timeline_charts
from infersight.report.svg.charts import PALETTE
from infersight.report.verdicts.html import inline_html, verdict_box
from infersight.report.view import NOT_DIAGNOSED, RunView, no_price_text
from infersight.stats.aggregate import client_headline

__all__ = ["banner", "fmt_cell", "redact", "run_section", "verdicts_html"]

_SECRET = re.compile(r"(api[_-]?key|secret|password|passwd|authorization|bearer|^token$)", re.I)

#: (title, aggregate key, unit) for the per-level latency tables.
LATENCY_TABLES = (
    ("TTFT (from intended send)", "ttft", "s"),
    ("TTFT (from actual send)", "ttft_from_sent", "s"),
    ("ITL (pooled, token-weighted)", "itl", "s"),
    ("ITL (per-request mean)", "itl_per_request", "s"),
    ("TPOT", "tpot", "s"),
    ("e2e latency (from intended send)", "e2e", "s"),
    ("schedule lag (sent - scheduled)", "schedule_lag", "s"),
    ("gateway queue delay", "queue_delay", "s"),
)


def redact(obj: Any) -> Any:
    """A copy with values under secret-looking keys replaced (never print API keys)."""
    if isinstance(obj, dict):
        return {k: ("***" if _SECRET.search(str(k)) and v else redact(v)) for k, v in obj.items()}
    if isinstance(obj, list):
        return [redact(v) for v in obj]
    return obj


def banner(view: RunView, *, named: bool = False) -> str:
    """Loud warnings for a client-limited or partial run (``named``: say which run)."""
    r = view.result
    out = []
    who = f"{escape(view.label)}: " if named else ""
    head = client_headline(r)
    if head is not None and r.environment.get("cpu_contention"):
        out.append(
            f'<div class="banner bad"><b>{who}{escape(head[0].capitalize())}:</b> '
            f"{escape(head[1])}</div>"
        )
    elif r.client_limited:
        reasons = "; ".join(r.client_limited_reasons) or "see the schedule lag table"
        out.append(
            f'<div class="banner bad"><b>{who}Client-limited run:</b> the load generator, not the '
            f"server, limited this measurement ({escape(reasons)}). Latency and throughput "
            "below understate what the server can do.</div>"
        )
    limited = [
        (lv.name, (lv.agg.get("client_limited") or {}).get("reasons") or [])
        for lv in view.levels
        if isinstance(lv.agg.get("client_limited"), dict) and lv.agg["client_limited"].get("flag")
    ]
    if limited and not r.client_limited:
        items = "; ".join(f"{n}: {', '.join(map(str, rs)) or 'flagged'}" for n, rs in limited)
        out.append(
            f'<div class="banner bad"><b>{who}Client-limited levels:</b> {escape(items)}</div>'
        )
    if r.partial:
        out.append(
            f'<div class="banner warn"><b>{who}Partial run:</b> it was stopped early; the numbers '
            "cover only what completed.</div>"
        )
    return "".join(out)


def _verdict_html(view: RunView, v: Verdict) -> str:
    # Windows are monotonic times like the records; show them from the run start.
    off = view.t0 if v.window.start >= view.t0 - 1.0 else 0.0
    where = f"window {v.window.start - off:.1f}–{v.window.end - off:.1f} s"
    if v.level:
        where = f"level {v.level} · {where}"
    return verdict_box(v, where)


def verdicts_html(view: RunView) -> str:
    """One box per stored verdict; a run without verdicts says how to get them."""
    if not view.verdicts:
        return f'<p class="muted">{inline_html(view.diagnosis_note or NOT_DIAGNOSED)}</p>'
    note = f'<p class="muted">{inline_html(view.diagnosis_note)}</p>' if view.diagnosis_note else ""
    return note + "".join(_verdict_html(view, v) for v in view.verdicts)


def _latency_tables(view: RunView) -> str:
    cols = ["count", "mean", *PERCENTILES, "max"]
    out = []
    for title, key, unit in LATENCY_TABLES:
        rows = []
        for lv in view.levels:
            s = lv.agg.get(key)
            if not isinstance(s, dict) or not s.get("count"):
                continue
            rows.append(
                f"<tr><td>{escape(lv.name)}</td>"
                + "".join(
                    f"<td class=num>{fmt_cell(s.get(c), 'int' if c == 'count' else unit)}</td>"
                    for c in cols
                )
                + "</tr>"
            )
        if rows:
            head = "".join(f"<th>{escape(c)}</th>" for c in ["level", *cols])
            out.append(
                f'<h3>{escape(title)}</h3><div class="wide"><table><tr>{head}</tr>'
                f"{''.join(rows)}</table></div>"
            )
    return "".join(out)


def _errors_table(view: RunView) -> str:
    rows = []
    for lv in view.levels:
        for kind, e in (lv.agg.get("errors_by_type") or {}).items():
            e = e if isinstance(e, dict) else {"count": e}
            rows.append(
                f"<tr><td>{escape(lv.name)}</td><td>{escape(str(kind))}</td>"
                f"<td class=num>{fmt_cell(e.get('count'), 'int')}</td>"
                f"<td class=msg>{escape(str(e.get('example') or ''))[:300]}</td></tr>"
            )
    if not rows:
        return '<p class="muted">No failed requests.</p>'
    return (
        "<table><tr><th>level</th><th>error</th><th>count</th><th>example</th></tr>"
        + "".join(rows)
        + "</table>"
    )


def _cost_table(view: RunView) -> str:
    rows = [
        f"<tr><td>{escape(lv.name)}</td><td class=num>{fmt_cell(c.get('usd'), '$')}</td>"
        f"<td class=num>{fmt_cell(c.get('usd_per_million_output_tokens'), '$')}</td>"
        f"<td class=num>{fmt_cell(c.get('projected_usd_per_day'), '$')}</td></tr>"
        for lv in view.levels
        if (c := lv.cost)
    ]
    if not rows or not view.priced:
        return f'<p class="muted">{inline_html(no_price_text(view))}</p>'
    return (
        f'<p class="muted">{escape(view.price_note)}; '
        "$/day projects the measured rate over 24 h.</p>"
        "<table><tr><th>level</th><th>$ per run</th><th>$ per Mtok output</th>"
        "<th>$ per day</th></tr>" + "".join(rows) + "</table>"
    )


def _kv_table(d: dict[str, Any]) -> str:
    if not d:
        return '<p class="muted">not recorded</p>'
    rows = "".join(
        f"<tr><td>{escape(str(k))}</td>"
        f"<td>{escape(v if isinstance(v, str) else json.dumps(v, default=str))}</td></tr>"
        for k, v in redact(d).items()
    )
    return f"<table class=kv>{rows}</table>"


def _environment(env: dict[str, Any]) -> str:
    """The host facts as a table; the diagnosis's physics as a small folded one."""
    physics = env.get("physics")
    rest = {k: v for k, v in env.items() if k != "physics"}
    return _kv_table(rest) + (physics_html(physics) if isinstance(physics, dict) else "")


def identity(view: RunView) -> str:
    r = view.result
    when = datetime.fromtimestamp(r.created, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    facts = {
        "run id": r.run_id or "-",
        "kind": r.kind,
        "created": when,
        "model": view.model or "-",
        "records": f"{len(r.records):,}",
        "samples": f"{len(r.samples):,}",
        "schema": str(r.schema_version),
    }
    cells = "".join(
        f"<div><span class=muted>{escape(k)}</span><br><b>{escape(v)}</b></div>"
        for k, v in facts.items()
    )
    notes = "".join(f"<li>{inline_html(str(n))}</li>" for n in r.notes)
    return f'<div class="facts">{cells}</div>' + (f"<ul>{notes}</ul>" if notes else "")


def _cdf_note(view: RunView) -> str:
    if len(view.levels) <= len(PALETTE):
        return ""
    return (
        f'<p class="muted">The CDFs show {len(PALETTE)} of {len(view.levels)} levels, evenly '
        "spaced; every level is in the tables.</p>"
    )


#: (anchor, heading) of a run's sections, in page order; the table of contents links them.
SECTIONS = (
    ("answer", "Answer"),
    ("verdicts", "Verdicts"),
    ("levels", "Load levels"),
    ("capacity", "Capacity curve"),
    ("model", "Model of the server"),
    ("throughput", "Throughput against latency"),
    ("latency", "Latency distributions"),
    ("timeline", "Timeline"),
    ("floors", "Against the physics floors"),
    ("percentiles", "Percentiles per level"),
    ("errors", "Errors"),
    ("cost", "Cost"),
    ("identity", "Run identity"),
)


def run_section(view: RunView, idx: int, *, heading: bool = True) -> str:
    """The full report of one run: the answer first, then the evidence. ``heading``:
    start with the run's label (a page of one run has it in its title already)."""
    r = view.result
    charts = "".join(throughput_latency_charts(view)) if view.levels else ""
    config = escape(json.dumps(redact(r.config), indent=2, default=str, sort_keys=True))
    body = {
        "answer": headline_html(view),
        "verdicts": verdicts_html(view),
        "levels": summary_table(view) + level_notes_html(view),
        "capacity": curve_html(r.capacity_curve),
        "model": model_html(r),
        "throughput": f'<div class="charts">{charts}</div>',
        "latency": f'{_cdf_note(view)}<div class="charts">{"".join(cdf_charts(view))}</div>',
        "timeline": f'<div class="charts">{"".join(timeline_charts(view))}</div>',
        "floors": floors_html(view),
        "percentiles": _latency_tables(view),
        "errors": _errors_table(view),
        "cost": _cost_table(view),
        "identity": f"<h3>Versions</h3>{_kv_table(r.versions)}"
        f"<h3>Environment</h3>{_environment(r.environment)}"
        f"<details><summary>Configuration (JSON)</summary><pre>{config}</pre></details>",
    }
    parts = [
        f'<h2 id="run-{idx}-{slug}">{escape(title)}</h2>{body[slug]}' for slug, title in SECTIONS
    ]
    # the answer, then what was run (model, requests), then the evidence
    return (
        f'<section id="run-{idx}">{f"<h1>{escape(view.label)}</h1>" if heading else ""}'
        f"{banner(view)}{parts[0]}"
        f"{identity(view)}{''.join(parts[1:])}</section>"
    )
