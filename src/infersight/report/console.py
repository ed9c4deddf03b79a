"""The console summary of a run: banner, one table row per level, notes, cost, verdicts.

A client-limited run says so first, in every output: here the banner above the table
(and in the files, ``RunResult.client_limited`` at the top of the JSON and a comment
line at the top of the CSV).
"""

from __future__ import annotations

import math
from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from infersight.core.records import RunResult
from infersight.report.headline.answer import build_headline, verdict_where
from infersight.stats.level_flags import client_headline, level_notes, level_state

__all__ = ["headline", "render_console", "table_console"]

#: The note under the table: what each column counts.
TABLE_NOTE = (
    "[dim]times in ms; TTFT and e2e from the intended send time; ITL pooled; latency "
    "over the requests sent in each level's window (in stats), throughput over its "
    "completions until the window's requests drained[/]"
)


def table_console() -> Console:
    """A console for the tables: a terminal's width, or 160 columns for a file or pipe
    (so the tables' columns stay whole)."""
    console = Console()
    return console if console.is_terminal else Console(width=160)


def headline(result: RunResult) -> str | None:
    """The line every output starts with when the client may have limited the run."""
    head = client_headline(result)
    return None if head is None else f"{head[0]}: {head[1]}"


def _ms(s: dict[str, Any] | None, key: str) -> str:
    v = None if s is None else s.get(key)
    if v is None:
        return "-"
    ms = v * 1e3
    return f"{ms:.0f}" if ms >= 100 else f"{ms:.1f}"


def _num(v: float | None, fmt: str = ".2f") -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, fmt)


def _columns(result: RunResult) -> tuple[tuple[str, ...], dict[str, list[str]]]:
    """The table's column names, and each level's cells keyed by its row label."""
    differ = any(
        a["requests"]["in_window"] != a["requests"]["total"] for a in result.aggregates.values()
    )
    cols = (
        "req/s",
        "tok/s",
        "ok/sent",
        *(("in stats",) if differ else ()),
        "state",
        "TTFT p50/p99",
        "TPOT p50",
        "ITL p50/p99",
        "e2e p50/p99",
        "lag p99",
        "goodput",
    )
    rows: dict[str, list[str]] = {}
    for name, a in result.aggregates.items():
        req = a["requests"]
        flag = " [red]![/]" if a["client_limited"]["flag"] else ""
        rows[name + flag] = [
            _num(a["request_throughput"]),
            _num(a["output_token_throughput"], ".1f"),
            f"{req['ok']}/{req['total']}",
            *((str(req["in_window"]),) if differ else ()),
            "[bold red]UNSUSTAINABLE[/]" if (st := level_state(a)) == "unsustainable" else st,
            f"{_ms(a['ttft'], 'p50')}/{_ms(a['ttft'], 'p99')}",
            _ms(a["tpot"], "p50"),
            f"{_ms(a['itl'], 'p50')}/{_ms(a['itl'], 'p99')}",
            f"{_ms(a['e2e'], 'p50')}/{_ms(a['e2e'], 'p99')}",
            _ms(a["schedule_lag"], "p99"),
            _num(a["goodput"]),
        ]
    return cols, rows


def _table(result: RunResult, console: Console) -> Any:

    cols, rows = _columns(result)
    title = f"infersight bench · {result.config.get('model', '')}"
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    # One row per level when it fits; on a narrow terminal, one row per metric.
    wide = sum(max(len(c), 9) + 3 for c in cols) + max((len(n) for n in rows), default=5) + 3
    if console.width >= wide or len(rows) > 6:
        table.add_column("level", no_wrap=True)
        for col in cols:
            table.add_column(col, justify="right", no_wrap=True)
        for name, cells in rows.items():
            table.add_row(name, *cells)
    else:
        table.add_column("metric", no_wrap=True)
        for name in rows:
            table.add_column(name, justify="right", no_wrap=True)
        for i, col in enumerate(cols):
            table.add_row(col, *(cells[i] for cells in rows.values()))
    return table


def _level_lines(result: RunResult, console: Console) -> None:
    """What each level's statistics cover, then its errors by kind."""
    for name, a in result.aggregates.items():
        for kind, text in level_notes(name, a):
            style = (
                "bold red" if kind == "unsustainable" else "yellow" if kind == "invalid" else "dim"
            )
            console.print(f"[{style}]{escape(text)}[/]", highlight=False)
    for name, a in result.aggregates.items():
        errs = a["errors_by_type"]
        if errs:
            parts = [f"{k} x{v['count']} (e.g. {v['example']})" for k, v in errs.items()]
            console.print(f"[red]errors in {name}:[/] " + "; ".join(parts))


def _cost_lines(result: RunResult, console: Console) -> None:
    cost = result.cost
    price = (cost or {}).get("price_per_million") or {}
    if not cost or not (price.get("input") or price.get("output")):
        return
    console.print(
        f"cost: ${cost['usd']:.4g} for the run, "
        f"${_num(cost['usd_per_million_output_tokens'], '.4g')} per million output tokens"
    )
    for name, c in cost["levels"].items():
        if c["projected_usd_per_day"] is not None:
            console.print(f"  {name}: ${c['projected_usd_per_day']:.4g}/day at this throughput")


def render_console(result: RunResult, console: Console) -> None:
    """Print the banner, the headline (best operating point, find-max, main verdict and
    fix), one table row per level, cost and every verdict with its level and window."""
    head = client_headline(result)
    if head is not None:
        console.print(f"[bold red]{head[0]}:[/] {head[1]}", highlight=False)
    if result.partial:
        console.print("[bold yellow]PARTIAL:[/] the run was stopped early; results are partial")
    origin = min((r.scheduled for r in result.records), default=None)
    answer = build_headline(result, list(result.aggregates.items()))
    for label, text in answer.lines(origin):
        console.print(f"[bold]{label}:[/] {escape(text)}", highlight=False)
    console.print(_table(result, console))
    console.print(TABLE_NOTE)
    _level_lines(result, console)
    _cost_lines(result, console)
    for v in result.diagnosis:  # each labelled: levels often share a verdict
        console.print(
            f"[bold]{escape(v.title or v.id)}[/] [dim]({escape(verdict_where(v, origin))})"
            f"[/]: {escape(v.summary)}",
            highlight=False,
        )
    for note in result.notes:
        console.print(f"[dim]note: {escape(note)}[/]")
