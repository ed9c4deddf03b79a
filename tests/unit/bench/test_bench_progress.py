"""The live progress counters and their display: cheap, bounded, and off the loop's way."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from infersight.bench.progress import LiveDisplay, LiveStats
from infersight.core.records import RequestRecord
from support.waiting import until


def _done(tokens: int = 16) -> RequestRecord:
    now = time.monotonic()
    return RequestRecord(
        "r",
        now - 0.1,
        sent=now - 0.1,
        chunk_times=[now - 0.05] * tokens,
        chunk_tokens=[1] * tokens,
        end=now,
        ok=True,
        completion_tokens=tokens,
    )


def test_rates_count_every_completion_at_high_rates() -> None:
    """6,000 completions inside the span are all counted (a bounded list of recent
    completions would forget the oldest and under-report a fast level)."""
    stats = LiveStats(clock=lambda: 1000.0)  # all in one instant: no clock to race
    stats.start -= 10.0  # the level has run long enough for the whole span
    rec = _done()
    for _ in range(6000):
        stats.started()
        stats.finished(rec)
    rps, tps = stats.rates(span=5.0)
    assert rps == pytest.approx(6000 / 5.0, rel=0.01)
    assert tps == pytest.approx(16 * 6000 / 5.0, rel=0.01)
    assert stats.done == 6000 and stats.in_flight == 0 and stats.tokens == 96000


def test_memory_stays_bounded_and_old_completions_leave_the_span() -> None:
    now = [1000.0]
    stats = LiveStats(clock=lambda: now[0])
    stats.start -= 100.0
    rec = _done()
    for _ in range(50_000):  # one a millisecond: 50 s, 200 quarter-second buckets
        now[0] += 0.001
        stats.finished(rec)
    assert len(stats._buckets) <= 40 and len(stats.ttfts) <= 500
    now[0] += 0.6
    rps, _ = stats.rates(span=0.25)
    assert rps == 0.0  # everything finished more than a bucket ago


def test_errors_are_counted_but_not_in_rates() -> None:
    stats = LiveStats()
    stats.start -= 10.0
    bad = RequestRecord("r", time.monotonic(), ok=False, error="StatusError")
    stats.started()
    stats.finished(bad)
    assert (stats.done, stats.errors, stats.rates()) == (1, 1, (0.0, 0.0))


def test_worker_snapshots_add_to_the_rates() -> None:
    stats = LiveStats()
    stats.start -= 10.0
    stats.merge_snapshot(
        {
            "done": 3,
            "errors": 0,
            "in_flight": 2,
            "tokens": 48,
            "ttfts": [0.02, 0.03, 0.04],
            "recent": [16, 16, 16],
        }
    )
    rps, tps = stats.rates(span=1.0)
    assert (stats.done, stats.in_flight, stats.tokens) == (3, 2, 48)
    assert rps == pytest.approx(3.0) and tps == pytest.approx(48.0)
    assert stats.ttft_p50_p99() == (0.03, 0.04)


def test_display_in_a_running_loop_redraws_from_the_loop_not_a_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """rich's refresh thread would take the GIL from the event loop four times a
    second; inside a loop the display redraws from the loop's own timer."""
    monkeypatch.setenv("FORCE_COLOR", "1")  # a terminal, as far as rich can tell
    monkeypatch.delenv("TTY_COMPATIBLE", raising=False)
    drawn: list[str] = []

    async def go() -> list[str]:
        before = {t.name for t in threading.enumerate()}
        with LiveDisplay(True) as disp:
            stats = LiveStats()
            disp.stats, disp.level = stats, "r"
            real = stats.line

            def line(level: str) -> str:
                drawn.append(threading.current_thread().name)
                return real(level)

            stats.line = line  # type: ignore[method-assign]
            await until(lambda: len(drawn) >= 2, "two redraws")
            new = {t.name for t in threading.enumerate()} - before
        return sorted(new)

    new_threads = asyncio.run(go())
    assert new_threads == []
    assert len(drawn) >= 2  # redrawn while the loop ran
    assert set(drawn) == {threading.main_thread().name}
