"""A Markdown summary for pasting into a GitHub issue: tables and verdicts."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from infersight.core.records import RunResult
from infersight.report.compare import _get, compare_levels, comparison_rows, delta, fmt_delta, judge
from infersight.report.svg import fmt_value
from infersight.report.view import RunView, build_views

__all__ = ["md_cell", "render_markdown", "render_views_markdown"]

_MARK = {"better": " ✅", "worse": " ❌", "same": ""}


def md_cell(text: Any) -> str:
    """Text safe inside a Markdown table cell (pipes, newlines and HTML neutralised)."""
    s = str(text).replace("\r", " ").replace("\n", " ")
    s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return s.replace("|", "\\|").replace("`", "'")


def _num(v: float | None, unit: str = "") -> str:
    if v is None or not math.isfinite(v):
        return "-"
    if unit == "$":
        return f"${v:,.4g}"
    return fmt_value(v, unit)


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    return [
        "| " + " | ".join(md_cell(h) for h in head) + " |",
        "|" + "|".join("---" if i == 0 else "---:" for i in range(len(head))) + "|",
        *("| " + " | ".join(r) + " |" for r in rows),
    ]


def _run_md(view: RunView) -> list[str]:
    r = view.result
    out = [f"### {md_cell(view.label)}", ""]
    facts = [f"model `{md_cell(view.model or '-')}`", f"{len(r.records):,} requests"]
    if r.versions.get("infersight"):
        facts.append(f"infersight {md_cell(r.versions['infersight'])}")
    out += [" · ".join(facts), ""]
    if r.client_limited:
        out += [
            "> [!WARNING]",
            "> **Client-limited run**: "
            + md_cell("; ".join(r.client_limited_reasons) or "the load generator limited it"),
            "",
        ]
    if r.partial:
        out += ["> [!WARNING]", "> **Partial run**: interrupted; numbers cover what completed.", ""]
    rows = []
    for lv in view.levels:
        a = lv.agg
        req = a.get("requests") or {}
        rows.append(
            [
                md_cell(lv.name),
                f"{req.get('total', len(lv.records)):,}",
                _num(_get(a, "success_rate"), "frac"),
                _num(_get(a, "output_token_throughput")),
                _num(_get(a, "request_throughput")),
                _num(_get(a, "ttft", "p50"), "s"),
                _num(_get(a, "ttft", "p99"), "s"),
                _num(_get(a, "itl", "p50"), "s"),
                _num(_get(a, "itl", "p99"), "s"),
                _num(_get(a, "e2e", "p99"), "s"),
                _num((lv.cost or {}).get("per_mtok_output_usd"), "$"),
            ]
        )
    head = [
        "level",
        "requests",
        "success",
        "out tok/s",
        "req/s",
        "TTFT p50",
        "TTFT p99",
        "ITL p50",
        "ITL p99",
        "e2e p99",
        "$/Mtok out",
    ]
    out += [*_table(head, rows), ""]
    out += _verdicts_md(view)
    return out


def _verdicts_md(view: RunView) -> list[str]:
    if not view.verdicts:
        return [f"_{md_cell(view.diagnosis_note or 'no diagnosis')}_", ""]
    out = ["**Verdicts**", ""]
    for v in view.verdicts:
        conf = v.get("confidence")
        c = f" ({float(conf) * 100:.0f}% confidence)" if isinstance(conf, int | float) else ""
        out.append(
            f"- **{md_cell(v.get('title') or v.get('id'))}**{c}: {md_cell(v.get('summary') or '')}"
        )
        ev = [
            f"{md_cell(e.get('name'))}={md_cell(e.get('value'))}{md_cell(e.get('unit') or '')}"
            for e in (v.get("evidence") or [])[:6]
            if isinstance(e, dict)
        ]
        if ev:
            out.append(f"  - evidence: {', '.join(ev)}")
        for f in (v.get("fixes") or [])[:4]:
            out.append(f"  - fix: {md_cell(f)}")
    return [*out, ""]


def _compare_md(views: Sequence[RunView]) -> list[str]:
    out = ["### Comparison", "", f"Baseline: {md_cell(views[0].label)} (✅ better, ❌ worse)", ""]
    for level, matched in compare_levels(views):
        head = ["metric", views[0].label] + [f"{v.label} (Δ, Δ%)" for v in views[1:]]
        rows = []
        for row in comparison_rows(matched):
            base = row.values[0]
            cells = [md_cell(row.metric), _num(base, row.unit)]
            for val in row.values[1:]:
                d, pct = delta(base, val)
                mark = _MARK.get(judge(row.better, base, val) or "", "")
                dtxt = md_cell(fmt_delta(d, row.unit))
                ptxt = "" if pct is None else f", {pct:+.1f}%"
                cells.append(f"{_num(val, row.unit)} ({dtxt}{ptxt}){mark}")
            rows.append(cells)
        out += [f"**Level {md_cell(level)}**", "", *_table(head, rows), ""]
    return out


def render_views_markdown(views: Sequence[RunView]) -> str:
    out = ["## infersight report", ""]
    if len(views) > 1:
        out += _compare_md(views)
    for v in views:
        out += _run_md(v)
    out.append(
        "<sub>TTFT and e2e count from the intended send time; ITL is pooled and "
        "token-weighted; percentiles are exact.</sub>"
    )
    return "\n".join(out) + "\n"


def render_markdown(
    results: RunResult | Sequence[RunResult], labels: Sequence[str] | None = None
) -> str:
    """Markdown summary (tables + verdicts) of one or several RunResults."""
    seq = [results] if isinstance(results, RunResult) else list(results)
    return render_views_markdown(build_views(seq, labels))
