"""The final account of a batch run, as data and as a console table."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field
from rich.console import Group
from rich.table import Table
from rich.text import Text

from infersight.core.wording import counted

__all__ = ["BatchSummary", "concurrency_text", "render_summary"]


class BatchSummary(BaseModel):
    """What a batch run did. Counts of this run unless named ``*_total``."""

    input: str
    output: str
    url: str | None = None
    model: str | None = None
    #: "completed" | "budget" | "interrupted" | "auth" | "nothing-to-do"
    stopped: str = "completed"
    partial: bool = False
    rows_in_input: int = 0
    bad_lines: list[dict[str, Any]] = Field(default_factory=list)
    #: Rows already in the output before this run (skipped by resume).
    already_done: int = 0
    #: Rows this run was asked to run (pending, or failed with --retry-failed).
    to_do: int = 0
    done: int = 0
    failed: int = 0
    #: Rows not run: budget stop or interruption (a rerun picks them up).
    not_run: int = 0
    skipped_bad: int = 0
    attempts: int = 0
    retries: int = 0
    #: Every failed attempt by error kind (including those retried later).
    errors_by_kind: dict[str, int] = Field(default_factory=dict)
    #: Final failures by error kind (rows written with an error).
    failed_by_kind: dict[str, int] = Field(default_factory=dict)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = 0.0
    #: Cost including rows from earlier runs in the same output file.
    cost_total: float | None = 0.0
    max_cost: float | None = None
    unpriced_models: list[str] = Field(default_factory=list)
    elapsed_s: float = 0.0
    rows_per_s: float = 0.0
    output_tokens_per_s: float = 0.0
    concurrency_mode: str = "adaptive"
    concurrency_settled: float | None = None
    concurrency_final: int | None = None
    concurrency_max: int | None = None
    concurrency_start: int | None = None
    #: How many times the limit changed (``decisions`` keeps at most 2,000 of them).
    concurrency_changes: int = 0
    decisions: list[dict[str, Any]] = Field(default_factory=list)
    #: Output maintenance: torn bytes cut, duplicate lines compacted.
    repaired_bytes: int = 0
    compacted_lines: int = 0
    #: Ids in the output that the input does not have (input edited?).
    foreign_ids: int = 0
    output_rows_ok: int = 0
    output_rows_failed: int = 0
    notes: list[str] = Field(default_factory=list)

    @property
    def exit_code(self) -> int:
        """0 = every row of the input done; 1 = failures or rows left; 130 = Ctrl-C."""
        if self.stopped == "interrupted":
            return 130
        return 0 if self.failed == 0 and self.not_run == 0 and self.output_rows_failed == 0 else 1


def concurrency_text(s: BatchSummary) -> str:
    """How the concurrency moved, plainly: ``started at 8, settled at 4 after 3
    changes`` (then the peak and the end, when they say something more)."""
    if s.concurrency_mode != "adaptive":
        return f"fixed at {s.concurrency_final} (--concurrency)"
    settled = s.concurrency_settled
    start = s.concurrency_start if s.concurrency_start is not None else s.concurrency_final
    if not s.concurrency_changes:
        return f"stayed at {start} (no change was needed)"
    text = (
        f"started at {start}, settled at {settled:g} after "
        f"{counted(s.concurrency_changes, 'change')}"
    )
    extra = []
    if s.concurrency_max is not None and s.concurrency_max > max(settled or 0, start or 0):
        extra.append(f"peak {s.concurrency_max}")
    if s.concurrency_final is not None and s.concurrency_final != settled:
        extra.append(f"{s.concurrency_final} at the end")
    return text + (f" ({', '.join(extra)})" if extra else "")


def _money(v: float | None) -> str:
    return "unpriced" if v is None else f"${v:,.4f}"


def render_summary(s: BatchSummary) -> Any:
    """A rich renderable: the headline numbers and the concurrency decisions."""
    t = Table(title=f"batch {s.input} -> {s.output}", show_header=False, title_justify="left")
    t.add_column(style="bold")
    t.add_column()
    t.add_row("status", s.stopped + (" (partial: rerun to resume)" if s.partial else ""))
    rows = f"{s.done} done, {s.failed} failed, {s.not_run} not run"
    rows += f"; {s.already_done} already in output, {counted(s.skipped_bad, 'bad line')} skipped"
    if s.skipped_bad:
        rows += " (an error line each in the output)"
    t.add_row("rows", rows)
    t.add_row(
        "output file",
        f"{s.output_rows_ok} ok, {s.output_rows_failed} failed of {s.rows_in_input} rows",
    )
    if s.failed_by_kind:
        t.add_row("failed rows", ", ".join(f"{k} {v}" for k, v in sorted(s.failed_by_kind.items())))
    if s.errors_by_kind:
        t.add_row(
            "attempt errors",
            ", ".join(f"{k} {v}" for k, v in sorted(s.errors_by_kind.items()))
            + f" ({s.retries} retried of {s.attempts} attempts)",
        )
    t.add_row("tokens", f"{s.prompt_tokens:,} prompt, {s.completion_tokens:,} output")
    cost = f"{_money(s.cost)} this run, {_money(s.cost_total)} in the output file"
    if s.max_cost is not None:
        cost += f" (max {_money(s.max_cost)})"
    t.add_row("cost", cost)
    t.add_row(
        "throughput",
        f"{s.rows_per_s:.2f} rows/s, {s.output_tokens_per_s:.1f} output tokens/s over "
        f"{s.elapsed_s:.1f} s",
    )
    if s.concurrency_settled is not None:
        t.add_row("concurrency", concurrency_text(s))
    parts: list[Any] = [t]
    for note in s.notes:
        parts.append(Text(f"note: {note}", style="yellow"))
    return Group(*parts)
