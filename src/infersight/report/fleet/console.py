"""The fleet diagnosis on the console: the headline, replicas by verdict, the worst
windows, the load-imbalance verdicts, then each replica's verdicts."""

from __future__ import annotations

from datetime import UTC, datetime

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from infersight.core.fleet import FleetReport, ReplicaDiagnosis
from infersight.core.verdicts import Verdict
from infersight.report.verdicts.console import render_verdicts

__all__ = ["REPLICA_COLUMNS", "clock", "fmt_num", "render_fleet", "replica_cells", "span_text"]


def clock(t: float, with_date: bool = True) -> str:
    """Unix seconds as UTC wall-clock time (``2024-05-01 14:05:00``)."""
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M:%S" if with_date else "%H:%M:%S")


def span_text(a: float, b: float) -> str:
    """``2024-05-01 14:00:00 - 14:05:00 UTC`` (the date once when it does not change)."""
    same = clock(a)[:10] == clock(b)[:10]
    return f"{clock(a)} - {clock(b, with_date=not same)} UTC"


def fmt_num(x: float | None, unit: str = "", nd: int = 1) -> str:
    if x is None:
        return "-"
    if unit == "%":
        return f"{x * 100:.0f}%"
    if unit == "s":
        return f"{x * 1000:.0f} ms" if x < 1 else f"{x:.2f} s"
    return f"{x:.{nd}f}"


#: The replicas table's columns, on the console and in HTML.
REPLICA_COLUMNS = (
    "replica",
    "model",
    "engine",
    "GPUs",
    "main verdict",
    "R",
    "S",
    "Q",
    "KV",
    "GPU util",
    "SM",
    "TTFT p99 (max)",
)


def replica_cells(rd: ReplicaDiagnosis) -> list[str]:
    """One replica's row of :data:`REPLICA_COLUMNS`, as plain (unescaped) text."""
    r, st = rd.replica, rd.stats
    return [
        r.id,
        r.model,
        r.engine,
        f"{len(r.gpus)} (by {r.gpu_join})" if r.gpus else "-",
        rd.main_title if rd.verdicts else "no data",
        fmt_num(st.get("R")),
        fmt_num(st.get("S"), nd=0),
        fmt_num(st.get("Q")),
        fmt_num(st.get("kv"), "%"),
        fmt_num(st.get("U"), "%"),
        fmt_num(st.get("SM"), "%"),
        fmt_num(st.get("ttft_p99_max"), "s"),
    ]


def _replica_table(report: FleetReport) -> Table:
    tab = Table(title="replicas", header_style="bold", title_justify="left")
    for col in REPLICA_COLUMNS:
        tab.add_column(col, justify="right" if col in ("R", "S", "Q", "KV") else "left")
    for rd in report.replicas:
        tab.add_row(*(escape(c) for c in replica_cells(rd)))
    return tab


def _worst_table(report: FleetReport) -> Table:
    tab = Table(
        title="worst windows (requests waiting x time)", header_style="bold", title_justify="left"
    )
    for col in ("window", "replica", "verdict", "waiting (mean)", "TTFT p99"):
        tab.add_column(col)
    for w in report.worst:
        tab.add_row(
            span_text(w.start, w.end),
            escape(w.replica),
            escape(w.title),
            fmt_num(w.waiting),
            fmt_num(w.ttft_p99, "s"),
        )
    return tab


def _when(v: Verdict) -> str:
    return span_text(v.window.start, v.window.end)


def _replica_verdicts(rd: ReplicaDiagnosis, con: Console) -> None:
    problems = [v for v in rd.verdicts if v.id != "healthy"] or rd.verdicts
    render_verdicts(
        problems,
        console=con,
        title=f"{rd.replica.id} ({rd.replica.engine}, {rd.replica.model})",
        window_text=_when,
    )


def render_fleet(report: FleetReport, console: Console | None = None) -> None:
    """Print the whole fleet diagnosis."""
    con = console or Console()
    sel = f" {report.selector}" if report.selector else ""
    con.print(
        f"[bold]Fleet diagnosis[/bold] of {escape(report.source)}{escape(sel)}: "
        f"{span_text(report.start, report.end)}, step {report.step:g} s, windows of "
        f"{report.window:g} s",
        highlight=False,
    )
    for i, line in enumerate(report.headline):
        con.print(f"[bold]{escape(line)}[/bold]" if i else escape(line), highlight=False)
    groups = "; ".join(f"{g.title}: {', '.join(g.replicas)}" for g in report.groups)
    if groups:
        con.print(f"[dim]by verdict:[/dim] {escape(groups)}", highlight=False)
    con.print(_replica_table(report))
    if report.worst:
        con.print(_worst_table(report))
    if report.balance:
        render_verdicts(report.balance, console=con, title="load balance", window_text=_when)
    for rd in report.replicas:
        if rd.verdicts:
            _replica_verdicts(rd, con)
    for note in report.notes:
        con.print(f"[dim]note: {escape(note)}[/dim]", highlight=False)
