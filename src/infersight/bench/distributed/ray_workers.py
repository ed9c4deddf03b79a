"""``--ray auto|ADDRESS --workers N``: one schedule driven from several hosts.

N load-generator workers (:class:`~infersight.bench.distributed.ray_actor.LoadWorker`) are placed
as Ray actors across the cluster's nodes (``spread`` by default: Ray's SPREAD
strategy; ``strict-spread``: a placement group with one worker per node, or a clear
error). They live for the whole run. Each level is split exactly as ``--workers``
splits it for processes (:func:`~infersight.bench.distributed.workers.split_work`), and the
outcomes merge as theirs do (:func:`~infersight.bench.distributed.workers.merge_outcomes`).

Clocks: before each level the driver measures every worker's clock offset
(:mod:`infersight.bench.clock`: the minimum round trip of several probes bounds it),
and gives each worker the level's start on its own clock, so every request is sent at
the instant a single process would send it. Records and samples come back on the
worker's clock and are moved onto the driver's with that offset. During a level the
offsets are measured again every ``ray_clock_interval`` seconds; a drift the
measurements prove is stored and noted. The RunResult's ``environment["ray"]`` keeps
each worker's host, node, offset and uncertainty per level.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from infersight.bench.clock import ClockProbe, OffsetEstimate, estimate_offset
from infersight.bench.distributed.ray_actor import LoadWorker
from infersight.bench.distributed.ray_merge import RayLevelOutcome, on_driver_clock
from infersight.bench.distributed.ray_place import (
    START_TIMEOUT,
    Placement,
    join_cluster,
    last_line,
    place_workers,
    release,
    resolve,
)
from infersight.bench.distributed.workers import merge_outcomes, split_work
from infersight.bench.level.work import LevelOutcome, LevelWork
from infersight.bench.progress import LiveStats
from infersight.bench.runtime import ClientSpec
from infersight.core.errors import InfersightError
from infersight.core.records import Sample
from infersight.flags.bench import DistributionSection

__all__ = ["RayLevelOutcome", "RayWorkers", "ray_pool"]

#: Clock probes per measurement (the one with the shortest round trip counts).
PROBES = 8


class RayWorkers:
    """The run's load-generator actors on a Ray cluster (``async with``)."""

    def __init__(
        self,
        spec: ClientSpec,
        *,
        address: str,
        workers: int,
        strategy: str = "spread",
        cpus: float = 1.0,
        sample_interval: float = 1.0,
        clock_interval: float = 10.0,
    ) -> None:
        self.spec = spec
        self.address = address
        self.n = workers
        self.strategy = strategy
        self.cpus = cpus
        self.sample_interval = sample_interval
        self.clock_interval = clock_interval
        self.notes: list[str] = []
        self._actors: list[Any] = []
        self._where: list[dict[str, Any]] = []
        self._clocks: list[list[dict[str, Any]]] = []
        self._placed: Placement | None = None
        self._joined = False

    # -- start and stop ------------------------------------------------------------
    async def __aenter__(self) -> RayWorkers:
        try:
            self._joined = join_cluster(self.address)
            self._placed = await place_workers(
                LoadWorker,
                self.spec,
                self.n,
                strategy=self.strategy,
                cpus=self.cpus,
                sample_interval=self.sample_interval,
            )
            self._actors, self._where = self._placed.actors, self._placed.where
            self._clocks = [[] for _ in self._actors]
        except BaseException:
            await self.close()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Stop the workers (and leave the cluster, when this run joined it)."""
        release(self._placed, leave=self._joined)
        self._placed, self._joined, self._actors = None, False, []

    # -- clocks ----------------------------------------------------------------------
    async def _measure(self, i: int) -> OffsetEstimate:
        probes = []
        for _ in range(PROBES):
            sent = time.monotonic()
            remote = await resolve(self._actors[i].clock.remote())
            probes.append(ClockProbe(sent, float(remote), time.monotonic()))
        return estimate_offset(probes)

    async def _measure_all(self, n: int) -> list[OffsetEstimate]:
        return list(await asyncio.gather(*(self._measure(i) for i in range(n))))

    # -- one level -------------------------------------------------------------------
    async def run_level(
        self,
        work: LevelWork,
        *,
        stop: Callable[[], bool],
        hard_stop: Callable[[], bool],
        live: LiveStats,
    ) -> RayLevelOutcome:
        """Run ``work`` across the workers (the interface of ``run_level_in_workers``);
        merge their records onto the driver's clock."""
        shares = split_work(work, self.n)
        actors = self._actors[: len(shares)]
        first_users = _first_users(shares)
        await asyncio.gather(
            *(
                resolve(a.prepare.remote(s, f, work.concurrency or 0))
                for a, s, f in zip(actors, shares, first_users, strict=True)
            )
        )
        runs: dict[asyncio.Future[Any], int] = {
            asyncio.ensure_future(resolve(a.run.remote())): i for i, a in enumerate(actors)
        }
        await self._until_ready(actors, runs, stop)
        start = await self._measure_all(len(actors))
        remeasured: list[list[OffsetEstimate]] = [[] for _ in actors]
        # The start leaves time for the word to reach every worker (the round trip
        # measured just now, generously): a late word would become schedule lag.
        t0 = time.monotonic() + 0.1 + 4 * max(e.rtt for e in start)
        await asyncio.gather(
            *(resolve(a.go.remote(t0 - e.offset)) for a, e in zip(actors, start, strict=True)),
            return_exceptions=True,
        )
        results: dict[int, tuple[LevelOutcome, list[Sample]]] = {}
        stopped = hard = False
        next_sync = time.monotonic() + self.clock_interval
        pending = set(runs)
        while pending:
            done, pending = await asyncio.wait(pending, timeout=0.25)
            for fut in done:
                i = runs[fut]
                try:
                    results[i] = fut.result()
                except Exception as e:  # the worker or its node died
                    self.notes.append(
                        f"level {work.name}: worker {i} on {self._where[i]['host']} failed "
                        f"({last_line(e)}); its share of the level is missing"
                    )
            if stop() and not stopped:
                stopped = True
                await _tell(actors, hard=False)
            if hard_stop() and not hard:
                hard = True
                await _tell(actors, hard=True)
            await self._merge_progress(actors, live)
            if pending and time.monotonic() >= next_sync:
                next_sync = time.monotonic() + self.clock_interval
                for i, est in enumerate(await self._measure_all(len(actors))):
                    remeasured[i].append(est)
        await self._merge_progress(actors, live)
        wall = time.monotonic() - t0
        return self._outcome(work.name, results, start, remeasured, wall)

    async def _until_ready(
        self, actors: list[Any], runs: dict[asyncio.Future[Any], int], stop: Callable[[], bool]
    ) -> None:
        """Wait until every worker has built its client (or has failed, or Ctrl-C)."""
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline and not stop():
            states = await asyncio.gather(
                *(resolve(a.ready.remote()) for a in actors), return_exceptions=True
            )
            if all(s is True or f.done() for s, f in zip(states, runs, strict=True)):
                return
            await asyncio.sleep(0.02)
        if not stop():
            raise InfersightError(f"--ray: the workers were not ready within {START_TIMEOUT:g} s")

    async def _merge_progress(self, actors: list[Any], live: LiveStats) -> None:
        with_snaps = await asyncio.gather(
            *(resolve(a.progress.remote()) for a in actors), return_exceptions=True
        )
        for snaps in with_snaps:
            if isinstance(snaps, list):
                for snap in snaps:
                    live.merge_snapshot(snap)

    def _outcome(
        self,
        level: str,
        results: dict[int, tuple[LevelOutcome, list[Sample]]],
        start: list[OffsetEstimate],
        remeasured: list[list[OffsetEstimate]],
        wall: float,
    ) -> RayLevelOutcome:
        parts, workers, samples = on_driver_clock(
            level, results, start, remeasured, self._where, self._clocks, self.notes
        )
        merged = merge_outcomes(parts, wall)
        return RayLevelOutcome(
            merged.records,
            merged.cpu_percent,
            merged.wall,
            merged.cpu_seconds,
            workers=workers,
            samples=samples,
        )

    def describe(self) -> dict[str, Any]:
        """What the RunResult keeps: the cluster, and each worker's host, node and
        clock offset (with its uncertainty) per level."""
        return {
            "address": self.address,
            "strategy": self.strategy,
            "cpus_per_worker": self.cpus,
            "nodes": len({w["node_id"] for w in self._where}),
            "workers": [{**w, "clock": c} for w, c in zip(self._where, self._clocks, strict=True)],
        }

    def summary(self) -> str:
        """One line for every output: where the load came from, how well timed."""
        nodes = {w["node_id"] for w in self._where}
        hosts = sorted({f"{w['host']} ({w['ip']})" for w in self._where})
        worst = max((c["uncertainty_s"] for cs in self._clocks for c in cs), default=None)
        clock = "" if worst is None else f"; clock offsets known to ± {worst * 1e3:.2f} ms"
        return (
            f"load from {len(self._where)} Ray worker(s) on {len(nodes)} node(s): "
            f"{', '.join(hosts)}{clock}"
        )


def _first_users(shares: list[LevelWork]) -> list[int]:
    """Closed loop: the index of each share's first user among all users."""
    out, n = [], 0
    for s in shares:
        out.append(n)
        n += s.concurrency or 0
    return out


async def _tell(actors: list[Any], *, hard: bool) -> None:
    """Ctrl-C to every worker (a dead one is reported by its run, not here)."""
    await asyncio.gather(*(resolve(a.stop.remote(hard)) for a in actors), return_exceptions=True)


@contextlib.asynccontextmanager
async def ray_pool(
    cfg: DistributionSection, spec: ClientSpec, *, sample_interval: float = 1.0
) -> AsyncIterator[RayWorkers | None]:
    """The run's Ray workers when ``cfg.ray`` names a cluster, else None; each samples
    its host every ``sample_interval`` seconds (``--sample-interval``)."""
    if cfg.ray is None:
        yield None
        return
    async with RayWorkers(
        spec,
        address=cfg.ray,
        workers=cfg.workers,
        strategy=cfg.ray_strategy,
        cpus=cfg.ray_cpus,
        sample_interval=sample_interval,
        clock_interval=cfg.ray_clock_interval,
    ) as pool:
        yield pool
