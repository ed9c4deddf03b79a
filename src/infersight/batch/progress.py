"""Live progress of a batch: a rich bar on a terminal, plain decision lines otherwise."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from infersight.control.controller import Decision
from infersight.core.durations import format_elapsed
from infersight.core.wording import counted

__all__ = ["BatchProgress", "PlainProgress", "make_progress", "progress_line"]


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


class PlainProgress(BatchProgress):
    """Not a terminal (CI, nohup, a pipe): a progress line every ``interval`` seconds
    (rows done and left, rows/s, output tok/s, errors, ETA), and the decisions and
    notes as lines, on stderr; no bar."""

    def __init__(
        self, stream: TextIO, interval: float = 10.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.stream = stream
        self.interval = interval
        self.clock = clock
        self.total = 0
        self.t0 = self.last = clock()

    def start(self, total: int) -> None:
        self.total = total
        self.t0 = self.last = self.clock()

    def update(
        self, *, done: int, failed: int, tokens: int, errors: int, limit: int, inflight: int
    ) -> None:
        now = self.clock()
        if now - self.last < self.interval:
            return
        self.last = now
        print(
            progress_line(
                now - self.t0,
                self.total,
                done=done,
                failed=failed,
                tokens=tokens,
                errors=errors,
                limit=limit,
            ),
            file=self.stream,
            flush=True,
        )

    def decision(self, d: Decision) -> None:
        print(f"[{d.t:7.1f}s] concurrency {d.old} -> {d.new}: {d.reason}", file=self.stream)

    def note(self, text: str) -> None:
        print(text, file=self.stream)


class _RichProgress(BatchProgress):
    """Progress bar with rows/s, output tokens/s, ETA, errors and concurrency."""

    def __init__(self, stream: TextIO) -> None:
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
        self.progress.console.print(
            f"[dim]{d.t:7.1f}s[/dim] concurrency {d.old} -> {d.new}: {d.reason}"
        )

    def note(self, text: str) -> None:
        self.progress.console.print(text)

    def stop(self) -> None:
        if self.task is not None:
            self.progress.stop()


def progress_line(
    elapsed: float, total: int, *, done: int, failed: int, tokens: int, errors: int, limit: int
) -> str:
    """``[  10.0s] 120 of 1,000 rows done (2 failed), 880 left: 12.0 rows/s, 410 output
    tok/s, 3 errors, concurrency 8, ETA 1m13s``."""
    finished = done + failed
    left = max(0, total - finished)
    rate = finished / elapsed if elapsed > 0 else 0.0
    eta = format_elapsed(left / rate) if rate > 0 else "unknown"
    failed_txt = f" ({failed:,} failed)" if failed else ""
    return (
        f"[{elapsed:7.1f}s] {finished:,} of {total:,} rows done{failed_txt}, {left:,} left: "
        f"{rate:.2f} rows/s, {tokens / elapsed if elapsed > 0 else 0.0:.0f} output tok/s, "
        f"{counted(errors, 'error')}, concurrency {limit}, ETA {eta if left else 'done'}"
    )


def make_progress(
    *, quiet: bool, stream: TextIO | None = None, interval: float = 10.0
) -> BatchProgress:
    """A bar on a terminal, plain lines otherwise (a progress line every ``interval``
    seconds), nothing when quiet."""
    out = stream or sys.stderr
    if quiet:
        return BatchProgress()
    if out.isatty():
        return _RichProgress(out)
    return PlainProgress(out, interval)
