"""``tune --ray ADDRESS``: the trials on a Ray cluster, one per node (or one per
``--gpus-per-trial`` GPUs of a node), docs/design.md section 8.

Each worker slot is a :class:`TrialWorker` actor pinned to its node (node affinity,
not soft): it starts the trial's server there from the ``--launch`` template (on the
node's loopback), measures it with bench from the same process (the load generator on
the same node), diagnoses the run and sends the RunResult back, with the server's log.
The driver saves each under ``OUT/trials/`` as the serial tune does
(``entrypoints.tune_trial.Trials.save``). Joining the cluster and stopping
the actors are bench --ray's (:mod:`infersight.bench.distributed.ray_place`), and so is what each
actor says of its node (:func:`infersight.bench.distributed.ray_actor.node_facts`).

Comparable nodes: the same number of CPUs and of GPUs, and the same GPU model (Ray's
``CPU``, ``GPU`` and ``accelerator_type:*`` resources). The trials run on the largest
group of comparable nodes only (the first, on a tie); the others are named in a note.
"""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from infersight.bench import BenchConfig
from infersight.bench.distributed.ray_actor import node_facts
from infersight.bench.distributed.ray_place import (
    START_TIMEOUT,
    Placement,
    join_cluster,
    last_line,
    release,
)
from infersight.core.errors import ConfigError, InfersightError
from infersight.core.records import RunResult
from infersight.entrypoints.bench import bench_on
from infersight.entrypoints.tune_targets import make_target
from infersight.entrypoints.tune_trial import Trials, diagnose, trial_bench
from infersight.tune import NextTrial, TrialDone, TrialRun, TrialSpec, TuneConfig

# Ray, an optional extra (~0.4 s to import), is imported only in the functions that use it.


__all__ = ["RayTrials", "comparable_key"]


def comparable_key(resources: Mapping[str, float]) -> str:
    """A node's comparability class from its Ray resources: ``cpu=8,gpu=2xH100``."""
    gpus = int(resources.get("GPU", 0))
    model = next(
        (k.split(":", 1)[1] for k in sorted(resources) if k.startswith("accelerator_type:")), ""
    )
    gpu = f"{gpus}x{model}" if gpus and model else str(gpus)
    return f"cpu={int(resources.get('CPU', 0))},gpu={gpu}"


class TrialWorker:
    """One worker slot on one node: opens the target there, benches it, diagnoses."""

    def __init__(self, cfg: TuneConfig, api_key: str | None) -> None:
        self.target = make_target(cfg, api_key)
        self._pid: int | None = None

    def where(self) -> dict[str, Any]:
        return node_facts()

    def run(self, setting: dict[str, int], bench: BenchConfig) -> dict[str, Any]:
        """The trial: its RunResult (diagnosed) or its typed error, and the server's log."""
        result: RunResult | None = None
        error: InfersightError | None = None
        with tempfile.TemporaryDirectory(prefix="infersight-trial-") as tmp:
            log = Path(tmp) / "server.log"
            try:
                with self.target.open(setting, Path(tmp)) as ep:
                    self._pid = ep.pid
                    result = bench_on(bench, ep)
            except InfersightError as e:
                error = e
            finally:
                self._pid = None
            text = log.read_bytes() if log.exists() else b""
        if result is not None:
            diagnose(result, bench)
        return {"result": result, "error": error, "log": text}

    def stop(self) -> None:
        """Stop the running trial's server (its process group), if any."""
        pid = self._pid
        if pid is not None:
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGTERM)


class RayTrials:
    """The worker slots on the cluster; ``run_trials`` keeps them busy."""

    def __init__(
        self, cfg: TuneConfig, bench: BenchConfig, trials: Trials, api_key: str | None
    ) -> None:
        assert cfg.ray is not None
        self.bench, self.trials, self.kind = bench, trials, cfg.target_kind
        self.joined = join_cluster(cfg.ray)
        self.placed = Placement()
        self.notes: list[str] = []
        try:
            self._place(cfg, api_key)
        except BaseException:
            release(self.placed, leave=self.joined)
            raise

    def _place(self, cfg: TuneConfig, api_key: str | None) -> None:
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        alive = [n for n in ray.nodes() if n.get("Alive")]
        groups: dict[str, list[dict[str, Any]]] = {}
        for n in alive:
            groups.setdefault(comparable_key(n.get("Resources", {})), []).append(n)
        if not groups:
            raise ConfigError(f"--ray {cfg.ray}: the cluster has no live node")
        key = max(groups, key=lambda k: len(groups[k]))  # the first on a tie
        left = [n for k, ns in groups.items() if k != key for n in ns]
        if left:
            self.notes.append(
                f"--ray: trials ran on the {len(groups[key])} comparable nodes ({key}); "
                f"{len(left)} other node(s) were left out: "
                + ", ".join(
                    f"{n.get('NodeManagerAddress')} ({comparable_key(n['Resources'])})"
                    for n in left
                )
            )
        g = cfg.gpus_per_trial
        per_node: list[tuple[dict[str, Any], int, float]] = []
        for n in groups[key]:
            gpus = float(n.get("Resources", {}).get("GPU", 0))
            if g is None:
                per_node.append((n, 1, gpus))
            elif gpus >= g:
                per_node.append((n, int(gpus // g), float(g)))
        if not per_node:
            raise ConfigError(f"--gpus-per-trial {g}: no node of the cluster has {g} GPUs ({key})")
        remote = ray.remote(max_concurrency=2)(TrialWorker)
        slots: list[tuple[dict[str, Any], float]] = [
            (n, gpus) for n, k, gpus in per_node for _ in range(k)
        ]
        self.placed.actors = [
            remote.options(
                num_cpus=0,
                num_gpus=gpus,
                scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False),
            ).remote(cfg, api_key)
            for n, gpus in slots
        ]
        try:
            self.where: list[dict[str, Any]] = ray.get(
                [a.where.remote() for a in self.placed.actors], timeout=START_TIMEOUT
            )
        except ray.exceptions.GetTimeoutError:
            raise ConfigError(
                f"--ray: the {len(slots)} trial workers did not start within "
                f"{START_TIMEOUT:g} s (is infersight installed on every "
                "node?)"
            ) from None
        except ray.exceptions.RayError as e:
            raise InfersightError(
                f"--ray: a trial worker failed to start: {last_line(e)}"
            ) from None
        self.slots = [str(w["node_id"]) for w in self.where]
        self.nodes = []
        for n, _k, _g in per_node:
            facts = next(w for w in self.where if w["node_id"] == n["NodeID"])
            self.nodes.append(
                {
                    "node_id": n["NodeID"],
                    "host": facts["host"],
                    "ip": facts["ip"],
                    "cpu_count": facts["cpu_count"],
                    "comparable": key,
                    "slots": self.slots.count(n["NodeID"]),
                }
            )

    def run_trials(self, next_trial: NextTrial, done: TrialDone) -> None:
        """Keep the slots busy: each free slot asks ``next_trial`` for its trial, and
        each finished run goes to ``done`` at once (before the free slot asks again,
        since what it gets may depend on that run); returns when nothing runs and no
        free slot gets a trial."""
        import ray

        idle = list(range(len(self.slots)))
        busy: dict[Any, tuple[int, TrialSpec, list[str] | None, float, float]] = {}
        try:
            while True:
                for slot in list(idle):
                    spec = next_trial(slot)
                    if spec is None:
                        continue
                    idle.remove(slot)
                    bench, levels = self._bench(spec)
                    ref = self.placed.actors[slot].run.remote(spec.setting, bench)
                    busy[ref] = (slot, spec, levels, time.monotonic(), time.time())
                if not busy:
                    break
                ready, _ = ray.wait(list(busy), num_returns=1)
                slot, spec, levels, t0, started = busy.pop(ready[0])
                run = self._finish(spec, ready[0], slot, levels, t0)
                run.started = started
                idle.append(slot)
                idle.sort()
                done(spec, run)
        except BaseException:
            self.stop()
            raise

    def _bench(self, spec: TrialSpec) -> tuple[BenchConfig, list[str] | None]:
        # Only the baseline runs the diagnosis's extra level: the A/A runs of every node
        # compare on the objective's level alone.
        return trial_bench(
            self.bench, spec.setting, self.kind, "baseline" if spec.role == "baseline" else "trial"
        )

    def _finish(
        self, spec: TrialSpec, ref: Any, slot: int, levels: list[str] | None, t0: float
    ) -> TrialRun:
        import ray

        node, wall = self.slots[slot], time.monotonic() - t0
        trial_dir = self.trials.out / "trials" / spec.name
        try:
            got = ray.get(ref)
        except ray.exceptions.RayError as e:
            return TrialRun(
                error=InfersightError(
                    f"--ray: the trial worker on {self.where[slot]['host']} failed: {last_line(e)}"
                ),
                wall=wall,
                node=node,
            )
        trial_dir.mkdir(parents=True, exist_ok=True)
        (trial_dir / "server.log").write_bytes(got["log"])
        if got["error"] is not None:
            return TrialRun(error=got["error"], wall=wall, node=node)
        result: RunResult = got["result"]
        facts = self.where[slot]
        result.config["tune_node"] = {
            "node_id": node,
            "host": facts["host"],
            "ip": facts["ip"],
            "slot": slot,
        }
        return self.trials.save(result, spec.setting, trial_dir, wall, levels, node=node)

    def stop(self) -> None:
        """Stop every running trial's server (Ctrl-C, a failure of the driver)."""
        import ray

        with contextlib.suppress(Exception):
            ray.get([a.stop.remote() for a in self.placed.actors], timeout=15)

    def close(self) -> None:
        """Stop the servers and the actors; leave the cluster when this run joined it."""
        self.stop()
        release(self.placed, leave=self.joined)
