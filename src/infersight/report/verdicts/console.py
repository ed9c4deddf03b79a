"""Verdicts on the console: one panel each with the summary, evidence, sources and fixes."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rich.console import Console, Group
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from infersight.core.records import RunResult
from infersight.core.verdicts import Verdict
from infersight.report.capacity_curve import advice_lines, print_curve
from infersight.report.model_lines import model_lines
from infersight.stats.aggregate import client_headline

__all__ = ["render_diagnosis", "render_verdicts"]

_STYLE = {
    "healthy": "green",
    "bandwidth_bound_decode": "cyan",
    "compute_bound_prefill": "cyan",
    "under_loaded": "yellow",
    "client_limited": "magenta",
}


def _panel(v: Verdict, origin: float, window_text: Callable[[Verdict], str] | None = None) -> Panel:
    tab = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    tab.add_column("evidence")
    tab.add_column("value", justify="right")
    tab.add_column("source", style="dim")
    for e in v.evidence:
        val = e.value_text() + (f" {e.unit}" if e.unit else "")
        tab.add_row(escape(e.name), escape(val), escape(e.source))
    fixes = "\n".join(f"  - {escape(f)}" for f in v.fixes)
    w0, w1 = v.window.start - origin, v.window.end - origin
    when = window_text(v) if window_text else f"{w0:.1f}-{w1:.1f} s"
    head = (
        f"{escape(v.summary)}\n[dim]window {escape(when)}"
        f"{' · level ' + escape(v.level) if v.level else ''} · engine {v.engine} · "
        f"confidence {v.confidence:.2f}[/dim]"
    )
    body: list[Any] = [head, tab]
    if fixes:
        body.append(f"[bold]fix[/bold]\n{fixes}")
    where = f" · level {escape(v.level)}" if v.level else f" · {w0:.0f}-{w1:.0f} s"
    return Panel(
        Group(*body),
        title=f"[bold]{escape(v.title)}[/bold]{where}",
        border_style=_STYLE.get(v.id, "red"),
        expand=True,
    )


def render_verdicts(
    verdicts: Sequence[Verdict],
    *,
    console: Console | None = None,
    title: str = "",
    window_text: Callable[[Verdict], str] | None = None,
) -> None:
    """One panel per verdict; windows in seconds from the first verdict's start, or as
    ``window_text(verdict)`` says (e.g. wall-clock times)."""
    con = console or Console()
    if title:
        con.print(f"[bold]{escape(title)}[/bold]")
    if not verdicts:
        con.print("no requests or samples to diagnose")
        return
    origin = min(v.window.start for v in verdicts)
    for v in verdicts:
        con.print(_panel(v, origin, window_text))


def render_diagnosis(
    result: RunResult, verdicts: Sequence[Verdict], *, console: Console, title: str = ""
) -> None:
    """What ``infersight diagnose`` prints for one run: the client-limited line first,
    then the level table the advice comes from, the run's one fix, and the verdicts."""
    head = client_headline(result)
    if head is not None:
        console.print(f"[bold magenta]{head[0]}:[/bold magenta] {head[1]}", highlight=False)
    if title:
        console.print(f"[bold]{escape(title)}[/bold]")
    if result.capacity_curve is not None:
        print_curve(result.capacity_curve, console)
    if result.recommendation is not None:
        for label, text in advice_lines(result.recommendation) + model_lines(result):
            console.print(f"[bold]{escape(label)}:[/bold] {escape(text)}", highlight=False)
    render_verdicts(verdicts, console=console)
