"""Live progress: counters the scheduler updates and a rich line that shows them.

Both sides are cheap, because both run on the load generator's event loop, where any
pause is schedule lag: a finished request costs a few integer updates (completions
and tokens are counted in quarter-second buckets, not kept one by one), and a redraw
(four a second, from the loop itself, not from a thread that would contend with it
for the GIL) sums a few buckets and sorts a few hundred recent TTFTs.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.live import Live

from infersight.core.records import RequestRecord

__all__ = ["LiveDisplay", "LiveStats", "ReportingStats"]

#: Width of a rate bucket (s), and how many are kept (the longest rate span).
_BUCKET = 0.25
_BUCKETS = 40
#: Recent TTFTs kept for the live p50/p99.
_TTFTS = 500


class LiveStats:
    """Running counts for one level: done, in flight, errors, tokens, recent TTFTs."""

    def __init__(
        self,
        total: int | None = None,
        duration: float | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.total = total
        self.duration = duration
        #: Rates and the ETA read this clock; tests pass their own instead of sleeping.
        self.clock = clock
        self.start = clock()
        self.done = 0
        self.errors = 0
        self.in_flight = 0
        self.tokens = 0
        self.ttfts: deque[float] = deque(maxlen=_TTFTS)
        #: [bucket index, completions, output tokens] of recent quarter-seconds.
        self._buckets: deque[list[int]] = deque(maxlen=_BUCKETS)

    def started(self) -> None:
        self.in_flight += 1

    def _count(self, completions: int, tokens: int) -> None:
        k = int(self.clock() / _BUCKET)
        b = self._buckets
        if b and b[-1][0] == k:
            last = b[-1]
            last[1] += completions
            last[2] += tokens
        else:
            b.append([k, completions, tokens])

    def finished(self, rec: RequestRecord) -> None:
        self.in_flight -= 1
        self.done += 1
        if not rec.ok:
            self.errors += 1
            return
        n = rec.output_tokens
        self.tokens += n
        ttft = rec.ttft
        if ttft is not None:
            self.ttfts.append(ttft)
        self._count(1, n)

    def merge_snapshot(self, snap: dict[str, Any]) -> None:
        """Add a worker process's increments (see ``snapshot``)."""
        self.done += snap["done"]
        self.errors += snap["errors"]
        self.in_flight += snap["in_flight"]
        self.tokens += snap["tokens"]
        self.ttfts.extend(snap["ttfts"])
        recent = snap["recent"]
        if recent:
            self._count(len(recent), sum(recent))

    def rates(self, span: float = 5.0) -> tuple[float, float]:
        """Requests/s and output tokens/s over the last ``span`` seconds."""
        now = self.clock()
        span = min(span, max(now - self.start, 1e-3))
        first = int((now - span) / _BUCKET)
        reqs = toks = 0
        for k, n, t in reversed(self._buckets):
            if k < first:
                break
            reqs += n
            toks += t
        return reqs / span, toks / span

    def ttft_p50_p99(self) -> tuple[float | None, float | None]:
        if not self.ttfts:
            return None, None
        v = sorted(self.ttfts)
        return v[len(v) // 2], v[min(len(v) - 1, int(len(v) * 0.99))]

    def eta(self) -> float | None:
        elapsed = self.clock() - self.start
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
    """A one-line rich Live view; a no-op when disabled or not on a terminal.

    Entered inside a running event loop, it redraws from that loop four times a second
    (rich's own refresh thread would contend with the loop for the GIL).
    """

    _PERIOD = 0.25

    def __init__(self, enabled: bool) -> None:
        self._live: Any = None
        self._enabled = enabled
        self._tick: asyncio.TimerHandle | None = None
        self.level = ""
        self.stats: LiveStats | None = None

    def __enter__(self) -> LiveDisplay:
        if self._enabled:
            console = Console(stderr=True)
            if console.is_terminal:
                try:
                    loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
                except RuntimeError:
                    loop = None
                self._live = Live(
                    "",
                    console=console,
                    refresh_per_second=4,
                    transient=True,
                    get_renderable=self._render,
                    auto_refresh=loop is None,
                )
                self._live.__enter__()
                if loop is not None:
                    self._tick = loop.call_later(self._PERIOD, self._redraw, loop)
        return self

    def _redraw(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._live is None:
            return
        self._live.refresh()
        self._tick = loop.call_later(self._PERIOD, self._redraw, loop)

    def __exit__(self, *exc: object) -> None:
        if self._tick is not None:
            self._tick.cancel()
            self._tick = None
        if self._live is not None:
            self._live.__exit__(None, None, None)
            self._live = None

    def show(self, level: str, stats: LiveStats) -> None:
        self.level, self.stats = level, stats

    def _render(self) -> str:
        return "" if self.stats is None else self.stats.line(self.level)


class ReportingStats(LiveStats):
    """Counts increments since the last report, for the parent's live display."""

    def __init__(self) -> None:
        super().__init__()
        self._snap: dict[str, Any] = self._zero()

    @staticmethod
    def _zero() -> dict[str, Any]:
        return {"done": 0, "errors": 0, "in_flight": 0, "tokens": 0, "ttfts": [], "recent": []}

    def started(self) -> None:
        super().started()
        self._snap["in_flight"] += 1

    def finished(self, rec: RequestRecord) -> None:
        super().finished(rec)
        s = self._snap
        s["in_flight"] -= 1
        s["done"] += 1
        if not rec.ok:
            s["errors"] += 1
            return
        s["tokens"] += rec.output_tokens
        if rec.ttft is not None:
            s["ttfts"].append(rec.ttft)
        s["recent"].append(rec.output_tokens)

    def take(self) -> dict[str, Any]:
        snap, self._snap = self._snap, self._zero()
        return snap
