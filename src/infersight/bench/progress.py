"""Live progress: counters the scheduler updates and a rich line that shows them.

The counters are cheap (a few integer updates per request) so they never slow the
hot path; the display redraws four times a second from them.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any

from infersight.core.records import RequestRecord

__all__ = ["LiveDisplay", "LiveStats"]


class LiveStats:
    """Running counts for one level: done, in flight, errors, tokens, recent TTFTs."""

    def __init__(self, total: int | None = None, duration: float | None = None) -> None:
        self.total = total
        self.duration = duration
        self.start = time.monotonic()
        self.done = 0
        self.errors = 0
        self.in_flight = 0
        self.tokens = 0
        self.ttfts: deque[float] = deque(maxlen=2000)
        #: (finish time, output tokens) of recent completions, for current rates.
        self.recent: deque[tuple[float, int]] = deque(maxlen=4000)

    def started(self) -> None:
        self.in_flight += 1

    def finished(self, rec: RequestRecord) -> None:
        self.in_flight -= 1
        self.done += 1
        if not rec.ok:
            self.errors += 1
            return
        n = rec.output_tokens
        self.tokens += n
        if rec.ttft is not None:
            self.ttfts.append(rec.ttft)
        self.recent.append((time.monotonic(), n))

    def merge_snapshot(self, snap: dict[str, Any]) -> None:
        """Add a worker process's increments (see ``snapshot``)."""
        self.done += snap["done"]
        self.errors += snap["errors"]
        self.in_flight += snap["in_flight"]
        self.tokens += snap["tokens"]
        self.ttfts.extend(snap["ttfts"])
        now = time.monotonic()
        for n in snap["recent"]:
            self.recent.append((now, n))

    def rates(self, span: float = 5.0) -> tuple[float, float]:
        """Requests/s and output tokens/s over the last ``span`` seconds."""
        now = time.monotonic()
        span = min(span, max(now - self.start, 1e-3))
        recent = [(t, n) for t, n in self.recent if now - t <= span]
        return len(recent) / span, sum(n for _, n in recent) / span

    def ttft_p50_p99(self) -> tuple[float | None, float | None]:
        if not self.ttfts:
            return None, None
        v = sorted(self.ttfts)
        return v[len(v) // 2], v[min(len(v) - 1, int(len(v) * 0.99))]

    def eta(self) -> float | None:
        elapsed = time.monotonic() - self.start
        if self.duration is not None:
            return max(self.duration - elapsed, 0.0)
        if self.total and self.done:
            return elapsed * (self.total - self.done) / self.done
        return None

    def line(self, level: str) -> str:
        rps, tps = self.rates()
        p50, p99 = self.ttft_p50_p99()
        eta = self.eta()
        total = f"/{self.total}" if self.total else ""
        ttft = "-" if p50 is None or p99 is None else f"{p50 * 1e3:.0f}/{p99 * 1e3:.0f} ms"
        return (
            f"[bold]{level}[/] done {self.done}{total} · in flight {self.in_flight} · "
            f"errors {self.errors} · {rps:.2f} req/s · {tps:.1f} tok/s · "
            f"TTFT p50/p99 {ttft} · ETA {'-' if eta is None else f'{eta:.0f}s'}"
        )


class LiveDisplay:
    """A one-line rich Live view; a no-op when disabled or not on a terminal."""

    def __init__(self, enabled: bool) -> None:
        self._live: Any = None
        self._enabled = enabled
        self.level = ""
        self.stats: LiveStats | None = None

    def __enter__(self) -> LiveDisplay:
        if self._enabled:
            from rich.console import Console
            from rich.live import Live

            console = Console(stderr=True)
            if console.is_terminal:
                self._live = Live(
                    "", console=console, refresh_per_second=4, transient=True,
                    get_renderable=self._render,
                )  # fmt: skip
                self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.__exit__(None, None, None)
            self._live = None

    def show(self, level: str, stats: LiveStats) -> None:
        self.level, self.stats = level, stats

    def _render(self) -> str:
        return "" if self.stats is None else self.stats.line(self.level)
