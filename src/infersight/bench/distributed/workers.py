"""``--workers N``: one level's schedule spread over N load-generator processes.

Monotonic time is system-wide on Linux, so every worker sends at the same absolute
instants the single-process scheduler would use: open-loop requests are dealt round
robin, closed-loop users are split across workers and draw request indices from one
shared counter (so the request count is exact). Each worker sends its records back
whole; the parent merges them, and aggregates do not depend on the merge order.

Workers ignore SIGINT; the parent sees Ctrl-C and tells them to stop through events,
so a stopped run still returns every worker's records.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import multiprocessing as mp
import queue
import signal
import time
from typing import Any, NamedTuple

from infersight.bench.executor import run_level
from infersight.bench.level.work import LevelOutcome, LevelWork
from infersight.bench.progress import LiveStats, ReportingStats
from infersight.bench.runtime import ClientSpec, make_client, run_coroutine
from infersight.core.records import RequestRecord

__all__ = ["merge_outcomes", "run_level_in_workers", "split_work"]


class _Shared(NamedTuple):
    """The parent's handles every worker holds: the common start time (0 until every
    worker is ready), the closed loop's request counter, the stop and hard-stop events,
    and the queue of messages to the parent."""

    t0: Any
    counter: Any
    stop_ev: Any
    hard_ev: Any
    out: Any


def _worker_main(index: int, spec: ClientSpec, work: LevelWork, shared: _Shared) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    outcome = run_coroutine(_worker_async(index, spec, work, shared))
    shared.out.put(
        (
            "done",
            index,
            [r.to_dict() for r in outcome.records],
            outcome.cpu_percent,
            outcome.cpu_seconds,
        )
    )


async def _worker_async(
    index: int, spec: ClientSpec, work: LevelWork, shared: _Shared
) -> LevelOutcome:
    t0, counter, stop_ev, hard_ev, out = shared
    stats = ReportingStats()

    def take() -> int | None:
        with counter.get_lock():
            if work.limit is not None and counter.value >= work.limit:
                return None
            counter.value += 1
            return int(counter.value - 1)

    async def report() -> None:
        while True:
            await asyncio.sleep(0.25)
            out.put(("progress", index, stats.take()))

    async with make_client(spec) as client:
        # Ready: tell the parent, then wait for the common start time it picks once
        # every worker is ready (process start-up time must not become schedule lag).
        out.put(("ready", index))
        while t0.value <= 0 and not stop_ev.is_set():
            await asyncio.sleep(0.01)
        reporter = asyncio.ensure_future(report())
        try:
            return await run_level(
                client,
                work,
                t0=t0.value,
                stop=stop_ev.is_set,
                hard_stop=hard_ev.is_set,
                next_index=take,
                live=stats,
            )
        finally:
            reporter.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reporter
            out.put(("progress", index, stats.take()))


def split_work(work: LevelWork, n: int) -> list[LevelWork]:
    """``work`` as ``n`` workers' shares: open-loop slots dealt round robin, closed-loop
    users split as evenly as possible (empty shares left out); a streamed schedule
    (``work.feed``) is split by the feed itself, every worker reading the same stream."""
    shares = []
    feeds = work.feed.split(n) if work.feed is not None else None
    for w in range(n):
        if work.concurrency is None:
            share = dataclasses.replace(work, slots=work.slots[w::n])
        else:
            users = work.concurrency // n + (1 if w < work.concurrency % n else 0)
            share = dataclasses.replace(work, concurrency=users)
        if feeds is not None:  # a streamed schedule: each worker reads its share
            share.feed = feeds[w]
        share.labels = {**work.labels, "worker": str(w)}
        shares.append(share)
    return [
        p
        for p in shares
        if p.slots or (p.concurrency or 0) > 0 or (p.feed is not None and p.concurrency is None)
    ]


async def run_level_in_workers(
    spec: ClientSpec,
    work: LevelWork,
    *,
    workers: int,
    stop: Any,
    hard_stop: Any,
    live: LiveStats,
) -> LevelOutcome:
    """Run ``work`` across ``workers`` processes; merge their records.

    ``stop``/``hard_stop`` are callables polled here and forwarded to the workers.
    The level starts 0.1 s after the last worker is ready.
    """
    ctx = mp.get_context("spawn")
    out: Any = ctx.Queue()
    counter: Any = ctx.Value("q", 0)
    stop_ev, hard_ev = ctx.Event(), ctx.Event()
    shares = split_work(work, workers)
    wall0 = time.monotonic()
    t0: Any = ctx.Value("d", 0.0)
    ready = 0
    procs = [
        ctx.Process(
            target=_worker_main,
            args=(i, spec, share, _Shared(t0, counter, stop_ev, hard_ev, out)),
            daemon=True,
        )
        for i, share in enumerate(shares)
    ]
    for p in procs:
        p.start()
    parts: list[LevelOutcome] = []
    pending = len(procs)
    try:
        while pending:
            if stop():
                stop_ev.set()
            if hard_stop():
                hard_ev.set()
            try:
                msg = out.get_nowait()
            except queue.Empty:
                if not any(p.is_alive() for p in procs) and out.empty():
                    break  # a worker died without reporting
                await asyncio.sleep(0.05)
                continue
            if msg[0] == "ready":
                ready += 1
                if ready == len(procs):
                    t0.value = time.monotonic() + 0.1
            elif msg[0] == "progress":
                live.merge_snapshot(msg[2])
            else:
                recs = [RequestRecord.from_dict(d) for d in msg[2]]
                parts.append(LevelOutcome(recs, msg[3], 0.0, msg[4]))
                pending -= 1
    finally:
        stop_ev.set()
        for p in procs:
            p.join(timeout=5)
            if p.is_alive():
                p.kill()
    # The level's wall time runs from the common start, not from process start-up.
    start = t0.value if t0.value > 0 else wall0
    return merge_outcomes(parts, time.monotonic() - start)


def merge_outcomes(parts: list[LevelOutcome], wall: float) -> LevelOutcome:
    """Workers' outcomes as one level's: every record, the busiest worker's CPU (it
    decides whether the load generator limited the run), CPU seconds summed.
    Aggregates do not depend on the order of the parts."""
    records = [r for p in parts for r in p.records]
    cpu = max((p.cpu_percent for p in parts), default=0.0)
    return LevelOutcome(records, cpu, wall, sum(p.cpu_seconds for p in parts))
