"""The load-generator worker that runs as a Ray actor on a cluster node.

The driver (:mod:`infersight.bench.distributed.ray_workers`) hands each worker its share of a level
(``prepare``) and starts it (``run``): the worker builds its client on its own uvloop
event loop, in a thread of its own, says it is ready (``ready``) and waits for the
level's start on its own clock (``go``), so that its start-up never becomes schedule
lag. The level then runs exactly as a ``--workers`` process runs it; the actor's other
threads answer the driver meanwhile: clock probes (``clock``), live progress
(``progress``) and Ctrl-C (``stop``).

Closed loop: a process worker draws request indices from a counter shared through
memory, which hosts cannot share. Here worker ``w`` owns the indices whose position in
the cycle of all users (``i mod concurrency``) is one of its own users, so the indices
are dealt in proportion to the users, every index is sent at most once, and a request
limit stays exact without a round trip per request.

Nothing here imports Ray at module level: the class is wrapped with ``ray.remote``
by the driver, and Ray is an optional extra.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import platform
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

from infersight import __version__
from infersight.bench.executor import run_level
from infersight.bench.level.work import LevelOutcome, LevelWork
from infersight.bench.progress import ReportingStats
from infersight.bench.runtime import ClientSpec, make_client, run_coroutine
from infersight.core.records import Sample
from infersight.telemetry.host import HostSampler

__all__ = ["LoadWorker", "node_facts", "owned_indices"]

#: Of the host sampler's readings, the ones a worker sends back (its own process and
#: its host's total CPU, under a name of its own so that the driver host's
#: ``host.cpu_percent`` keeps meaning the driver's host).
_KEEP = {"process.cpu_percent", "process.rss_bytes"}


def node_facts() -> dict[str, Any]:
    """Where the calling Ray actor runs: host, Ray node, IP, pid, cores, versions (also
    what ``tune --ray`` records of each trial's node)."""
    import ray
    from ray.util import get_node_ip_address

    return {
        "host": platform.node(),
        "node_id": ray.get_runtime_context().get_node_id(),
        "ip": get_node_ip_address(),
        "pid": os.getpid(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "infersight": __version__,
    }


def owned_indices(
    first_user: int, users: int, concurrency: int, limit: int | None
) -> Iterator[int]:
    """Request indices of the worker running users ``first_user .. first_user+users-1``
    of ``concurrency``: those ``i`` with ``i mod concurrency`` among its users, below
    ``limit`` (no limit: for ever)."""
    for i in itertools.count():
        if limit is not None and i >= limit:
            return
        if first_user <= i % concurrency < first_user + users:
            yield i


class LoadWorker:
    """One load generator on one node: its share of every level, on its own clock."""

    def __init__(self, index: int, spec: ClientSpec, sample_interval: float = 1.0) -> None:
        self.index = index
        self.spec = spec
        self.sample_interval = sample_interval
        self._work: LevelWork | None = None
        self._take: Callable[[], int | None] | None = None
        self._stop = threading.Event()
        self._hard = threading.Event()
        self._ready = threading.Event()
        self._t0: float | None = None
        self._progress: deque[dict[str, Any]] = deque()

    def where(self) -> dict[str, Any]:
        """Where this worker runs: host, Ray node, pid, cores."""
        return {"worker": self.index, **node_facts()}

    def clock(self) -> float:
        """This worker's monotonic clock (the driver brackets the call with its own)."""
        return time.monotonic()

    def prepare(self, work: LevelWork, first_user: int, concurrency: int) -> None:
        """Take this worker's share of the next level (before anyone starts)."""
        self._work = work
        self._stop.clear()
        self._hard.clear()
        self._ready.clear()
        self._t0 = None
        self._progress.clear()
        self._take = None
        if work.concurrency is not None:
            it = owned_indices(first_user, work.concurrency, concurrency, work.limit)
            self._take = lambda: next(it, None)

    def ready(self) -> bool:
        """Whether the running level's client is built and waits for ``go``."""
        return self._ready.is_set()

    def go(self, t0: float) -> float:
        """Start the level at ``t0`` (this worker's clock); returns this worker's clock
        when the word arrived (after ``t0``: the start was late)."""
        self._t0 = t0
        return time.monotonic()

    def stop(self, hard: bool = False) -> None:
        """Ctrl-C on the driver: stop scheduling (``hard``: skip the grace period)."""
        self._stop.set()
        if hard:
            self._hard.set()

    def progress(self) -> list[dict[str, Any]]:
        """Live-progress increments since the last call."""
        out = []
        while self._progress:
            out.append(self._progress.popleft())
        return out

    def run(self) -> tuple[LevelOutcome, list[Sample]]:
        """Run the prepared share from the time ``go`` gives; return the records, the
        worker's CPU and its samples, all on this worker's clock."""
        return run_coroutine(_run_share(self))


# Module level, not a method: Ray treats an actor with any coroutine method as an
# asyncio actor and would then run every call on one event loop, one at a time.
async def _run_share(w: LoadWorker) -> tuple[LevelOutcome, list[Sample]]:
    work = w._work
    assert work is not None, "prepare() comes before run()"
    stats = ReportingStats()
    sampler = HostSampler({"loadgen": os.getpid()}, per_cpu=False)
    samples: list[Sample] = []

    async def report() -> None:
        # Progress four times a second; the host and this process every interval.
        next_sample = time.monotonic()
        while True:
            await asyncio.sleep(0.25)
            w._progress.append(stats.take())
            if time.monotonic() >= next_sample:
                next_sample += w.sample_interval
                samples.extend(_own(sampler.sample_sync()))

    async with make_client(w.spec) as client:
        w._ready.set()
        while w._t0 is None and not w._stop.is_set():
            await asyncio.sleep(0.005)
        t0 = time.monotonic() if w._t0 is None else w._t0
        reporter = asyncio.ensure_future(report())
        try:
            outcome = await run_level(
                client,
                work,
                t0=t0,
                stop=w._stop.is_set,
                hard_stop=w._hard.is_set,
                next_index=w._take,
                live=stats,
            )
        finally:
            reporter.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reporter
            w._progress.append(stats.take())
    samples.extend(_own(sampler.sample_sync()))
    return outcome, samples


def _own(samples: list[Sample]) -> list[Sample]:
    out = [s for s in samples if s.name in _KEEP]
    out += [
        Sample(s.t, "loadgen_host.cpu_percent", s.value, {})
        for s in samples
        if s.name == "host.cpu_percent" and s.labels.get("cpu") == "all"
    ]
    return out
