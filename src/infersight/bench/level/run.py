"""One fixed level (``--concurrency`` or ``--rate``) planned and run, and the choice of
where a level's work runs: this process, ``--workers`` processes or Ray actors.

Each function receives the configuration sections it reads
(:mod:`infersight.flags.bench`), not the whole configuration.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any, Protocol

from infersight.bench.datasets import PromptSource
from infersight.bench.distributed.workers import run_level_in_workers
from infersight.bench.executor import run_level
from infersight.bench.level.spec import LevelSpec
from infersight.bench.level.work import LevelOutcome, LevelWork
from infersight.bench.progress import LiveDisplay, LiveStats
from infersight.bench.runtime import ClientSpec
from infersight.bench.schedule import open_loop_schedule
from infersight.bench.stop import Stop
from infersight.bench.target import Target
from infersight.bench.workload import build_bodies
from infersight.flags.bench import LoadSection, TargetSection, WorkloadSection

__all__ = ["Executor", "run_fixed_level"]


class LevelPool(Protocol):
    """Load generators placed for the whole run (Ray workers,
    :class:`~infersight.bench.distributed.ray_workers.RayWorkers`)."""

    async def run_level(
        self,
        work: LevelWork,
        *,
        stop: Callable[[], bool],
        hard_stop: Callable[[], bool],
        live: LiveStats,
    ) -> LevelOutcome: ...


class Executor:
    """Runs a level's work in this process, in ``workers`` processes or on Ray (``pool``)."""

    def __init__(
        self, client: Any, spec: ClientSpec, stop: Stop, pool: LevelPool | None, workers: int
    ) -> None:
        self.client = client
        self.spec = spec
        self.stop = stop
        self.pool = pool
        self.workers = workers

    async def __call__(self, work: LevelWork, live: LiveStats, lead: float = 0.01) -> LevelOutcome:
        """Run ``work``; a single process starts ``lead`` seconds from now."""
        stop = self.stop
        if self.pool is not None:
            return await self.pool.run_level(
                work, stop=lambda: stop.stop, hard_stop=lambda: stop.hard, live=live
            )
        if self.workers > 1:
            return await run_level_in_workers(
                self.spec,
                work,
                workers=self.workers,
                stop=lambda: stop.stop,
                hard_stop=lambda: stop.hard,
                live=live,
            )
        return await run_level(
            self.client,
            work,
            t0=time.monotonic() + lead,
            stop=lambda: stop.stop,
            hard_stop=lambda: stop.hard,
            live=live,
        )


async def run_fixed_level(
    load: LoadSection,
    workload: WorkloadSection,
    target_cfg: TargetSection,
    target: Target,
    level: LevelSpec,
    prompts: PromptSource,
    execute: Executor,
    display: LiveDisplay,
) -> LevelOutcome:
    """Plan a closed-loop or open-loop level, show its progress and run it."""
    n_req = load.effective_requests()
    slots: list[tuple[int, float]] = []
    if level.rate is not None:
        offsets = open_loop_schedule(
            level.rate,
            arrival=level.arrival,
            burstiness=load.burstiness,
            requests=n_req if n_req is not None or not math.isinf(level.rate) else 64,
            duration=None if math.isinf(level.rate) else load.duration,
            seed=workload.seed,
        )
        slots = [(i, float(o)) for i, o in enumerate(offsets)]
        n_bodies = len(slots)
    else:
        assert level.concurrency is not None
        n_bodies = (
            n_req
            if n_req is not None
            else min(5000, level.concurrency * math.ceil(load.duration or 1) * 10)
        )
    bodies = build_bodies(
        await prompts.take(max(n_bodies, 1)),
        model=target.model,
        endpoint=target_cfg.endpoint,
        stream=target_cfg.stream,
        ignore_eos=workload.ignore_eos,
    )
    work = LevelWork(
        name=level.name,
        path=target.path,
        bodies=bodies,
        concurrency=level.concurrency,
        slots=slots,
        duration=load.duration,
        limit=n_req,
        timeout=target_cfg.timeout,
        grace=load.grace,
    )
    live = LiveStats(total=len(slots) if slots else n_req, duration=load.duration)
    display.show(level.name, live)
    return await execute(work, live)
