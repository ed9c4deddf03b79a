"""Observed ITL and TTFT against the roofline floors, from the verdicts' evidence.

The diagnosis computes the floors (docs/design.md section 6) and attaches them to each
verdict as evidence (keys ``itl_floor``, ``itl_ratio``, ``ttft_floor``, ...). The
report gathers them per level into one table instead of recomputing the physics.
"""

from __future__ import annotations

import math
from html import escape
from typing import Any

from infersight.report.svg.charts import fmt_value
from infersight.report.view import RunView

__all__ = ["FLOOR_EVIDENCE", "HEAD", "floor_rows", "floors_html", "floors_markdown"]

#: Evidence keys of the floors, and the report's column for each. The observed values
#: are the level's aggregates (the percentile tables' numbers): ITL pooled and
#: token-weighted, TTFT from the actual send (what prefill can explain).
FLOOR_EVIDENCE = {
    "itl_p50": "itl",
    "itl_floor": "itl_floor",
    "itl_ratio": "itl_ratio",
    "ttft_sent_p50": "ttft",
    "ttft_floor": "ttft_floor",
    "ttft_ratio": "ttft_ratio",
}
#: Column headings: one definition per column, named as in the percentile tables.
HEAD = (
    "level",
    "ITL p50 (pooled)",
    "ITL floor",
    "ITL / floor",
    "TTFT p50 (from actual send)",
    "TTFT floor (prefill)",
    "TTFT / floor",
)


def floor_rows(view: RunView) -> list[dict[str, Any]]:
    """One row per level (or verdict window) that has floor evidence."""
    rows: dict[str, dict[str, Any]] = {}
    for v in view.verdicts:
        found = {FLOOR_EVIDENCE[e.key]: e for e in v.evidence if e.key in FLOOR_EVIDENCE}
        if not found:
            continue
        key = v.level or v.id or "run"
        row = rows.setdefault(key, {"level": key, "source": ""})
        for col, e in found.items():
            row.setdefault(col, e.value)
        for col in ("itl_floor", "ttft_floor"):
            if col in found:
                row["source"] = row["source"] or found[col].source
    return list(rows.values())


def _s(v: Any) -> str:
    return fmt_value(float(v), "s") if isinstance(v, int | float) and math.isfinite(v) else "-"


def _x(v: Any) -> str:
    return f"{float(v):.3g}×" if isinstance(v, int | float) and math.isfinite(v) else "-"


def floors_html(view: RunView) -> str:
    rows = floor_rows(view)
    if not rows:
        return (
            '<p class="muted">No roofline floors: the model shape or the device is unknown '
            "(run <code>infersight diagnose RESULT.json --model CONFIG --gpu NAME</code>).</p>"
        )
    body = "".join(
        f"<tr><td>{escape(r['level'])}</td><td class=num>{_s(r.get('itl'))}</td>"
        f"<td class=num>{_s(r.get('itl_floor'))}</td><td class=num>{_x(r.get('itl_ratio'))}</td>"
        f"<td class=num>{_s(r.get('ttft'))}</td><td class=num>{_s(r.get('ttft_floor'))}</td>"
        f"<td class=num>{_x(r.get('ttft_ratio'))}</td>"
        f"<td class=muted>{escape(r['source'])}</td></tr>"
        for r in rows
    )
    head = "".join(f"<th>{escape(h)}</th>" for h in (*HEAD, "source"))
    return (
        '<p class="muted">A ratio near 1× means the step runs at the hardware limit; far '
        "above it, time goes elsewhere (scheduling, host, queueing). Observed values are "
        "the level's aggregates, as in the percentile tables.</p>"
        f'<div class="wide"><table><tr>{head}</tr>{body}</table></div>'
    )


def floors_markdown(view: RunView) -> list[str]:
    rows = floor_rows(view)
    if not rows:
        return []
    out = ["| " + " | ".join(HEAD) + " |", "|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        level = r["level"].replace("|", "\\|").replace("<", "&lt;")
        out.append(
            f"| {level} | {_s(r.get('itl'))} | {_s(r.get('itl_floor'))} | "
            f"{_x(r.get('itl_ratio'))} | {_s(r.get('ttft'))} | {_s(r.get('ttft_floor'))} | "
            f"{_x(r.get('ttft_ratio'))} |"
        )
    return [*out, ""]
