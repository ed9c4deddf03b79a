"""Live progress of a batch: a rich bar on a terminal, plain decision lines otherwise."""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

from infersight.batch.controller import Decision

__all__ = ["BatchProgress", "make_progress"]


class BatchProgress:
    """Receives the runner's counters; the base class shows nothing."""

    def start(self, total: int) -> None:
        """The run begins with ``total`` rows to do."""

    def update(
        self, *, done: int, failed: int, tokens: int, errors: int, limit: int, inflight: int
    ) -> None:
        """Counters changed (called often; implementations throttle)."""

    def decision(self, d: Decision) -> None:
        """The concurrency limit changed."""

    def note(self, text: str) -> None:
        """A one-line message for the user."""

    def stop(self) -> None:
        """The run is over."""


class _PlainProgress(BatchProgress):
    """Not a terminal: print decisions and notes as lines on stderr, no bar."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def decision(self, d: Decision) -> None:
        print(f"[{d.t:7.1f}s] concurrency {d.old} -> {d.new}: {d.reason}", file=self.stream)

    def note(self, text: str) -> None:
        print(text, file=self.stream)


class _RichProgress(BatchProgress):
    """Progress bar with rows/s, output tokens/s, ETA, errors and concurrency."""

    def __init__(self, stream: TextIO) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.console = Console(file=stream)
        self.progress = Progress(
            TextColumn("[bold]batch"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[rate]}"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            TextColumn("{task.fields[extra]}"),
            console=self.console,
            refresh_per_second=4,
            transient=False,
        )
        self.task: Any = None
        self.t0 = time.monotonic()

    def start(self, total: int) -> None:
        self.t0 = time.monotonic()
        self.progress.start()
        self.task = self.progress.add_task("batch", total=total, rate="", extra="")

    def update(
        self, *, done: int, failed: int, tokens: int, errors: int, limit: int, inflight: int
    ) -> None:
        if self.task is None:
            return
        dt = max(1e-6, time.monotonic() - self.t0)
        rate = f"{(done + failed) / dt:.2f} rows/s {tokens / dt:.0f} tok/s"
        extra = f"c={limit} ({inflight} in flight) err {errors} failed {failed}"
        self.progress.update(self.task, completed=done + failed, rate=rate, extra=extra)

    def decision(self, d: Decision) -> None:
        self.progress.console.print(f"[dim]{d.t:7.1f}s[/dim] concurrency {d.old} -> {d.new}: {d.reason}")

    def note(self, text: str) -> None:
        self.progress.console.print(text)

    def stop(self) -> None:
        if self.task is not None:
            self.progress.stop()


def make_progress(*, quiet: bool, stream: TextIO | None = None) -> BatchProgress:
    """A bar on a terminal, plain lines otherwise, nothing when quiet."""
    out = stream or sys.stderr
    if quiet:
        return BatchProgress()
    if out.isatty():
        return _RichProgress(out)
    return _PlainProgress(out)
