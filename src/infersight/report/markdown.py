"""A Markdown summary for pasting into a GitHub issue: tables and verdicts."""

from __future__ import annotations

import math
from collections.abc import Sequence

from infersight.core.numbers import number_at
from infersight.core.records import RunResult
from infersight.report.capacity_curve import curve_markdown
from infersight.report.compare.html import OVERVIEW_METRICS, call_text, threshold_text
from infersight.report.compare.rows import (
    CompareRow,
    delta,
    fmt_delta,
    matched_rows,
    unmatched_levels,
)
from infersight.report.floors_table import floors_markdown
from infersight.report.headline.html import run_headline
from infersight.report.levels import level_notes_md
from infersight.report.md_text import md_cell
from infersight.report.svg.charts import fmt_value
from infersight.report.verdicts.html import ev_value
from infersight.report.view import NOT_DIAGNOSED, RunView, build_views, no_price_text
from infersight.stats.level_flags import client_headline, level_state
from infersight.stats.significance import BETTER, DEFAULT_DELTA, SAME, WORSE

__all__ = ["md_cell", "render_markdown", "render_views_markdown"]

_MARK = {BETTER: " ✅", WORSE: " ❌", SAME: " ≈"}


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
    flagged = client_headline(r)
    if flagged is not None:
        label = (
            flagged[0].capitalize() if r.environment.get("cpu_contention") else "Client-limited run"
        )
        out += ["> [!WARNING]", f"> **{label}**: " + md_cell(flagged[1]), ""]
    if r.partial:
        out += [
            "> [!WARNING]",
            "> **Partial run**: stopped early; numbers cover what completed.",
            "",
        ]
    out += _headline_md(view)
    priced = view.priced
    rows = []
    for lv in view.levels:
        a = lv.agg
        req = a.get("requests") or {}
        rows.append(
            [
                md_cell(lv.name),
                f"{req.get('total', len(lv.records)):,}",
                f"{req['in_window']:,}" if isinstance(req.get("in_window"), int) else "-",
                _num(number_at(a, "success_rate"), "frac"),
                _num(number_at(a, "output_token_throughput")),
                _num(number_at(a, "request_throughput")),
                _num(number_at(a, "ttft", "p50"), "s"),
                _num(number_at(a, "ttft", "p99"), "s"),
                _num(number_at(a, "itl", "p50"), "s"),
                _num(number_at(a, "itl", "p99"), "s"),
                _num(number_at(a, "e2e", "p99"), "s"),
                *(
                    [_num((lv.cost or {}).get("usd_per_million_output_tokens"), "$")]
                    if priced
                    else []
                ),
                "**UNSUSTAINABLE**" if (st := level_state(a)) == "unsustainable" else st,
            ]
        )
    head = [
        "level",
        "sent",
        "in stats",
        "success",
        "out tok/s",
        "req/s",
        "TTFT p50",
        "TTFT p99",
        "ITL p50",
        "ITL p99",
        "e2e p99",
        *(["$/Mtok out"] if priced else []),
        "state",
    ]
    out += [*_table(head, rows), ""]
    if not priced:
        out += [f"Cost: {md_cell(no_price_text(view))}", ""]
    out += level_notes_md(view)
    out += curve_markdown(r.capacity_curve, md_cell)
    out += floors_markdown(view)
    out += _verdicts_md(view)
    return out


def _headline_md(view: RunView) -> list[str]:
    """The answer first: best operating point(s), find-max, main verdict, the fix."""
    head = run_headline(view)
    origin = view.t0
    lines = [
        f"- **{md_cell(label.capitalize())}**: {md_cell(text)}"
        for label, text in head.lines(origin)
    ]
    return [*lines, ""] if lines else []


def _verdicts_md(view: RunView) -> list[str]:
    if not view.verdicts:
        return [f"_{md_cell(view.diagnosis_note or NOT_DIAGNOSED)}_", ""]
    out = ["**Verdicts**", ""]
    for v in view.verdicts:
        c = f" ({v.confidence * 100:.0f}% confidence)"
        if v.level:
            c += f", level {md_cell(v.level)}"
        out.append(f"- **{md_cell(v.title or v.id)}**{c}: {md_cell(v.summary)}")
        ev = [
            f"{md_cell(e.name)} = {md_cell(ev_value(e.value))}"
            + (f" {md_cell(e.unit)}" if e.unit else "")
            for e in v.evidence[:6]
        ]
        if ev:
            out.append(f"  - evidence: {', '.join(ev)}")
        for f in v.fixes[:4]:
            out.append(f"  - fix: {md_cell(f)}")
    return [*out, ""]


def _change(row: CompareRow, i: int, *, short: bool) -> str:
    base, val = row.values[0], row.values[i]
    d, pct = delta(base, val)
    c = row.call(i)
    mark = "" if c is None else _MARK.get(c.call, " ❔")
    if short:
        return f"{_num(val, row.unit)}" + (f" ({pct:+.1f}%)" if pct is not None else "") + mark
    ptxt = "" if pct is None else f", {pct:+.1f}%"
    call = "" if c is None else f" {md_cell(call_text(c))}"
    return f"{_num(val, row.unit)} ({md_cell(fmt_delta(d, row.unit))}{ptxt}){mark}{call}"


def _compare_md(views: Sequence[RunView], threshold: float) -> list[str]:
    out = [
        "### Comparison",
        "",
        f"Baseline: {md_cell(views[0].label)} (✅ better, ❌ worse, ≈ no significant "
        "difference, ❔ inconclusive: run more)",
        "",
        md_cell(threshold_text(threshold, len(views) - 1)),
        "",
    ]
    matched = matched_rows(views, threshold=threshold)
    for line in unmatched_levels(views):
        out += [f"> {md_cell(line)}", ""]
    if len(matched) > 1:  # overview: one line per level, headline metrics only
        per = [(lv, {r.metric: r for r in rows}) for lv, _, rows in matched]
        metrics = [m for m in OVERVIEW_METRICS if any(m in by for _, by in per)]
        head = ["level"] + [f"{m} ({v.label})" for m in metrics for v in views]
        table = []
        for level, by in per:
            cells = [md_cell(level)]
            for m in metrics:
                row = by.get(m)
                if row is None:
                    cells += ["-"] * len(views)
                    continue
                cells.append(_num(row.values[0], row.unit))
                cells += [_change(row, i, short=True) for i in range(1, len(row.values))]
            table.append(cells)
        out += [*_table(head, table), ""]
    fold = len(matched) > 3
    for level, _, level_rows in matched:
        head = ["metric", views[0].label] + [f"{v.label} (Δ, Δ%, call)" for v in views[1:]]
        rows = [
            [md_cell(r.metric), _num(r.values[0], r.unit)]
            + [_change(r, i, short=False) for i in range(1, len(r.values))]
            for r in level_rows
        ]
        title = f"Level {md_cell(level)}"
        if fold:  # GitHub folds <details>; the blank line lets the table render inside
            out += [
                f"<details><summary>{title}</summary>",
                "",
                *_table(head, rows),
                "",
                "</details>",
                "",
            ]
        else:
            out += [f"**{title}**", "", *_table(head, rows), ""]
    return out


def render_views_markdown(views: Sequence[RunView], *, threshold: float = DEFAULT_DELTA) -> str:
    out = ["## infersight report", ""]
    if len(views) > 1:
        out += _compare_md(views, threshold)
    for v in views:
        out += _run_md(v)
    out.append(
        "<sub>TTFT and e2e count from the intended send time; ITL is pooled and "
        "token-weighted; percentiles are exact.</sub>"
    )
    return "\n".join(out) + "\n"


def render_markdown(
    results: RunResult | Sequence[RunResult],
    labels: Sequence[str] | None = None,
    *,
    threshold: float = DEFAULT_DELTA,
) -> str:
    """Markdown summary (tables + verdicts) of one or several RunResults."""
    seq = [results] if isinstance(results, RunResult) else list(results)
    return render_views_markdown(build_views(seq, labels), threshold=threshold)
