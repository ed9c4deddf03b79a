"""The monitor's history (sparklines of the last few minutes) and the server's process
list, as rich tables sized to the terminal."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from infersight.core.durations import format_elapsed
from infersight.monitor.history import sparkline
from infersight.monitor.state import MonitorState

__all__ = ["LABEL_WIDTH", "VALUE_WIDTH", "history_table", "process_table", "section_table"]

LABEL_WIDTH, VALUE_WIDTH = 24, 24
NA = "n/a"


def section_table(title: str, *, header: bool = True, expand: bool = False, pad: int = 1) -> Table:
    """A section of the monitor view: a borderless table under its title, flush left."""
    return Table(
        title=title,
        title_justify="left",
        expand=expand,
        box=None,
        show_header=header,
        header_style="bold",
        padding=(0, pad),
    )


def _last(values: list[float | None]) -> float | None:
    return next((v for v in reversed(values) if v is not None), None)


def _fmt(v: float | None, spec: str, unit: str = "") -> str:
    return NA if v is None else format(v, spec) + unit


def history_table(st: MonitorState, width: int) -> tuple[Table, int]:
    """Sparklines of busy, R (of S), Q, tokens/s and TTFT p50 (a line only for what the
    engine exports); returns the table and its height in lines."""
    h = st.history
    cells = max(8, width - LABEL_WIDTH - VALUE_WIDTH - 6)
    reach = h.seconds("busy")
    t = section_table(f"History (last {format_elapsed(reach)}, now at the right)", header=False)
    t.add_column(width=LABEL_WIDTH, no_wrap=True, style="bold")
    t.add_column(width=cells, no_wrap=True)
    t.add_column(width=VALUE_WIDTH, no_wrap=True)
    busy = h.values("busy")
    t.add_row(
        st.busy_label,
        Text(sparkline(busy, cells, 1.0), style="green"),
        _fmt(None if _last(busy) is None else 100 * (_last(busy) or 0), ".0f", "%"),
    )
    slots = _last(h.values("slots"))
    if h.has("running"):
        run = h.values("running")
        top = max(slots or 0.0, *(v for v in run if v is not None))
        t.add_row(
            "running R" + (f" of S={slots:.0f}" if slots else ""),
            Text(sparkline(run, cells, top or None), style="cyan"),
            f"R {_fmt(_last(run), '.0f')}" + (f" / S {slots:.0f}" if slots else ""),
        )
    if h.has("waiting"):
        wait = h.values("waiting")
        now = _last(wait)
        t.add_row(
            "waiting Q",
            Text(sparkline(wait, cells), style="red" if now else "dim"),
            f"Q {_fmt(now, '.0f')}  (max {max(v for v in wait if v is not None):.0f})",
        )
    if h.has("tok_s") or h.has("running"):
        tok = h.values("tok_s")
        t.add_row(
            "generated tok/s",
            Text(sparkline(tok, cells), style="magenta"),
            f"{_fmt(_last(tok), '.1f')} tok/s",
        )
    if h.has("ttft"):
        ttft = h.values("ttft")
        last = _last(ttft)
        t.add_row(
            "TTFT p50",
            Text(sparkline(ttft, cells), style="yellow"),
            NA if last is None else f"{last * 1000:.0f} ms",
        )
    return t, t.row_count + 1


def process_table(st: MonitorState, max_rows: int) -> tuple[Table | Text, int]:
    """The server process and its children: pid, CPU (% of a core), RSS, threads,
    command; at most ``max_rows`` rows (a last line says how many more)."""
    rows = st.processes
    if not rows:
        return Text(
            "processes: the server is not a local process this user can see", style="dim"
        ), 1
    t = section_table("Server processes")
    for col in ("pid", "CPU", "RSS", "threads"):  # numbers keep their width...
        t.add_column(col, justify="right", no_wrap=True, min_width=len(col))
    t.add_column("process", no_wrap=True, overflow="ellipsis", ratio=1)  # ...the command gives way
    shown = rows if len(rows) <= max_rows else rows[: max(1, max_rows - 1)]
    for r in shown:
        rss = NA if r.rss_bytes is None else f"{r.rss_bytes / 2**20:.0f} MiB"
        name = "  " * r.depth + (r.command or r.name)
        t.add_row(
            str(r.pid),
            _fmt(r.cpu_percent, ".0f", "%"),
            rss,
            _fmt(None if r.threads is None else float(r.threads), ".0f"),
            name,
        )
    if len(shown) < len(rows):
        t.add_row("", "", "", "", Text(f"... {len(rows) - len(shown)} more", style="dim"))
    return t, t.row_count + 2
