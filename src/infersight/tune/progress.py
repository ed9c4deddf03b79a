"""A progress bar for ``tune``: trials done of those planned, elapsed, time left; one
line per finished trial above it."""

from __future__ import annotations

import time
from collections.abc import Mapping

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from infersight.core.tune_result import TrialRecord
from infersight.tune.summary import setting_text

__all__ = ["TuneProgress"]


def trial_line(t: TrialRecord, objective: str) -> str:
    """``#3 search slots 8: goodput 12.1 req/s [11.8, 12.4], better than the baseline``."""
    head = f"#{t.index} {t.role} {setting_text(t.setting)}"
    if t.status == "failed":
        return f"{head}: [red]failed[/] {escape(t.error or '')}: {escape(t.error_message or '')}"
    val = "-" if t.objective is None else f"{t.objective:.3g}"
    ci = f" [{t.low:.3g}, {t.high:.3g}]" if t.low is not None and t.high is not None else ""
    vs = f", {t.vs_baseline.call} against the baseline" if t.vs_baseline is not None else ""
    slo = "" if t.slo_met is None else (", SLO met" if t.slo_met else ", [yellow]SLO missed[/]")
    state = " [yellow](stopped)[/]" if t.status == "partial" else ""
    model = f" (model: {t.predicted:.3g})" if t.predicted is not None else ""
    held = (
        ""
        if t.confirmed is None
        else (f", confirms #{t.confirms}" if t.confirmed else f", [yellow]refutes #{t.confirms}[/]")
    )
    return (
        f"{head}: {objective} {val} req/s{escape(ci)}{escape(model)}{slo}{escape(vs)}{held}{state}"
    )


class TuneProgress:
    """The bar (a no-op when ``enabled`` is False or the console is not a terminal,
    where only the trial lines are printed)."""

    def __init__(
        self, console: Console, *, enabled: bool = True, budget_s: float | None = None
    ) -> None:
        self.console = console
        self.budget_s = budget_s
        self.t0 = time.monotonic()
        self._walls: list[float] = []
        self._total = 3
        self._done = 0
        self._bar: Progress | None = None
        if enabled and console.is_terminal:
            self._bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("{task.fields[left]}"),
                console=console,
                transient=True,
            )
            self._task = self._bar.add_task("tune", total=self._total, left="")

    def __enter__(self) -> TuneProgress:
        if self._bar is not None:
            self._bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()

    def _left(self) -> str:
        elapsed = time.monotonic() - self.t0
        if self.budget_s is not None:
            return f"{max(0.0, self.budget_s - elapsed) / 60:.1f} min of the budget left"
        if not self._walls:
            return ""
        per = sum(self._walls) / len(self._walls)
        return f"~{max(0, self._total - self._done) * per / 60:.1f} min left"

    def _update(self, description: str) -> None:
        if self._bar is not None:
            self._bar.update(
                self._task,
                description=description,
                total=max(self._total, self._done),
                completed=self._done,
                left=self._left(),
            )

    def planned(self, total: int) -> None:
        self._total = total
        self._update("tune")

    def trial_started(self, index: int, role: str, setting: Mapping[str, int]) -> None:
        self._update(escape(f"trial {index} ({role}): {setting_text(setting)}"))

    def trial_done(self, trial: TrialRecord, objective: str) -> None:
        self._done += 1
        self._walls.append(trial.wall_s)
        self.console.print(trial_line(trial, objective), highlight=False)
        self._update("tune")
