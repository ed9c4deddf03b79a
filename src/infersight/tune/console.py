"""The tune result on the terminal: the answer, the trials with their intervals, and
the before/after with each metric's call."""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from infersight.core.tune_result import TuneResult
from infersight.stats.significance import BETTER, SAME, WORSE
from infersight.tune.summary import setting_text

__all__ = ["render_tune"]

_STYLE = {BETTER: "green", WORSE: "red", SAME: "dim"}


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v * 1000:.0f}" if v >= 0.1 else f"{v * 1000:.1f}"


def _trials_table(result: TuneResult) -> object:
    what = "goodput" if result.objective == "goodput" else "req/s"
    table = Table(
        title=f"tune · {result.knob or 'baseline'} · {result.search}",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    for col, right in (
        ("#", True),
        ("role", False),
        ("setting", False),
        (what, True),
        ("95% interval", True),
        ("model", True),
        ("vs baseline (B/A)", False),
        ("TTFT p99 ms", True),
        ("TPOT p99 ms", True),
        ("SLO", False),
        ("diagnosis", False),
    ):
        table.add_column(col, justify="right" if right else "left", no_wrap=col != "diagnosis")
    for t in result.trials:
        mark = " *" if t.index == result.chosen_trial else ""
        if t.status == "failed":
            table.add_row(
                str(t.index),
                t.role,
                escape(setting_text(t.setting, result.knob)) + mark,
                f"[red]{escape(t.error or 'failed')}[/]",
                "",
                escape(t.predicted_text()),
                escape(t.error_message or ""),
                "",
                "",
                "",
                "",
            )
            continue
        vs = t.vs_baseline
        call = (
            ""
            if vs is None
            else (
                f"{escape(vs.interval_text())} "
                f"[{_STYLE.get(vs.call, 'yellow')}]{escape(vs.call)}[/]"
            )
        )
        table.add_row(
            str(t.index),
            escape(t.role_text()),
            escape(setting_text(t.setting, result.knob)) + mark,
            "-" if t.objective is None else f"{t.objective:.3g}",
            f"{t.low:.3g}-{t.high:.3g}" if t.low is not None and t.high is not None else "-",
            escape(t.predicted_text()),
            call,
            _ms(t.ttft_p99),
            _ms(t.tpot_p99),
            "" if t.slo_met is None else ("met" if t.slo_met else "[yellow]missed[/]"),
            escape(t.verdict or ""),
        )
    return table


def _before_after(result: TuneResult, console: Console) -> None:
    if not result.before_after:
        return
    table = Table(
        title="before (baseline, 2 runs) / after (the choice, run again)",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    for col in ("metric", "before", "after", "after/before [95%]", "call"):
        table.add_column(col, justify="left" if col in ("metric", "call") else "right")
    for c in result.before_after:
        fmt = (lambda v: f"{v:.3g}") if c.better == "higher" else _ms
        table.add_row(
            escape(c.label + ("" if c.better == "higher" else " (ms)")),
            "-" if c.a is None else fmt(c.a),
            "-" if c.b is None else fmt(c.b),
            escape(c.interval_text()),
            f"[{_STYLE.get(c.call, 'yellow')}]{escape(c.call)}[/]",
        )
    console.print(table)


def render_tune(result: TuneResult, console: Console) -> None:
    """Print the tune result: answer first, then the evidence."""
    if result.partial:
        console.print(
            f"[bold yellow]PARTIAL:[/] stopped early ({result.stopped}); "
            "the trials below are what was done"
        )
    console.print(f"[bold]Answer:[/] {escape(result.summary)}", highlight=False)
    if result.guide.get("reason"):
        console.print(
            f"[bold]Knob:[/] {escape(str(result.knob))} ({escape(result.guide['reason'])})",
            highlight=False,
        )
    if result.noise_floor is not None:
        console.print(
            f"[bold]Noise floor:[/] {result.noise_floor:.1%} ({escape(result.noise_basis)}):"
            " a setting counts as better only beyond it",
            highlight=False,
        )
    console.print(_trials_table(result))
    console.print(
        "[dim]* the chosen setting; intervals are 95%, from 10 time slices of each "
        "trial's best level; model: the objective the model fitted on the trials "
        "before it predicted; B/A against the baseline's two runs[/]"
    )
    _before_after(result, console)
    for note in result.notes:
        console.print(f"[dim]note: {escape(note)}[/]", highlight=False)
