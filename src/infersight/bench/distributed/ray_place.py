"""Joining a Ray cluster and placing the load-generator workers on its nodes.

Every failure here is one clear line before any load: Ray not installed, no cluster at
the address, too few free CPUs, too few nodes for ``strict-spread``, workers that cannot
start (infersight missing on a node), or a loopback ``--url`` that workers on other
hosts could not reach.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from infersight.bench.distributed.ray_extra import INSTALL_HINT, ray_installed
from infersight.bench.runtime import ClientSpec
from infersight.core.endpoint import is_loopback
from infersight.core.errors import ConfigError, InfersightError

# Ray, an optional extra (~0.4 s to import), is imported only in the functions that use it.

__all__ = [
    "START_TIMEOUT",
    "Placement",
    "join_cluster",
    "last_line",
    "place_workers",
    "release",
    "resolve",
]

#: Seconds to wait for the workers to start on their nodes.
START_TIMEOUT = 120.0


@dataclass(slots=True)
class Placement:
    """The workers' actor handles, where each runs, and their placement group."""

    actors: list[Any] = field(default_factory=list)
    where: list[dict[str, Any]] = field(default_factory=list)
    group: Any = None


def join_cluster(address: str) -> bool:
    """Connect this process to the cluster; False when it already was (then it is not
    this run's to leave)."""
    if not ray_installed():
        raise ConfigError(f"--ray needs Ray, an optional extra: {INSTALL_HINT}")
    import ray

    if ray.is_initialized():
        return False
    _check_reachable(address)
    # ray.init sets its own SIGTERM handler in the main thread; the run treats
    # SIGTERM like Ctrl-C (partial results), so its handler is put back.
    main = threading.current_thread() is threading.main_thread()
    prev = signal.getsignal(signal.SIGTERM) if main else None
    try:
        ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False)
    except (ConnectionError, RuntimeError, ValueError) as e:
        text = str(e).strip()
        first = text.splitlines()[0] if text else type(e).__name__
        raise ConfigError(f"--ray {address}: cannot join the Ray cluster ({first})") from None
    finally:
        if main and prev is not None:
            signal.signal(signal.SIGTERM, prev)
    return True


async def place_workers(
    worker: type,
    spec: ClientSpec,
    n: int,
    *,
    strategy: str,
    cpus: float,
    sample_interval: float,
) -> Placement:
    """Start ``n`` actors of the ``worker`` class (``spread``: Ray's SPREAD;
    ``strict-spread``: one per node) and learn where each runs."""
    import ray

    await _wait_for_cpus(n * cpus, n, cpus)
    placed = Placement()
    remote_cls = ray.remote(max_concurrency=4)(worker)
    try:
        strategies = _strategies(placed, n, strategy, cpus)
        placed.actors = [
            remote_cls.options(num_cpus=cpus, scheduling_strategy=s).remote(
                i, spec, sample_interval
            )
            for i, s in enumerate(strategies)
        ]
        calls = asyncio.gather(*(resolve(a.where.remote()) for a in placed.actors))
        placed.where = list(await asyncio.wait_for(calls, START_TIMEOUT))
        _check_reach(spec.base_url, placed.where)
    except TimeoutError:
        release(placed, leave=False)
        raise ConfigError(
            f"--ray: the {n} workers did not start within {START_TIMEOUT:g} s "
            "(is infersight installed on every node?)"
        ) from None
    except InfersightError:
        release(placed, leave=False)
        raise
    except Exception as e:  # a worker that cannot import infersight, typically
        release(placed, leave=False)
        raise InfersightError(f"--ray: a worker failed to start: {last_line(e)}") from None
    return placed


async def _wait_for_cpus(need: float, n: int, cpus: float) -> None:
    import ray

    # A run that just ended may still be handing its workers' CPUs back.
    deadline = time.monotonic() + 10.0
    while (free := float(ray.available_resources().get("CPU", 0.0))) + 1e-9 < need:
        if time.monotonic() > deadline:
            raise ConfigError(
                f"--ray: the cluster has {free:g} free CPU(s); --workers {n} × "
                f"--ray-cpus {cpus:g} needs {need:g}"
            )
        await asyncio.sleep(0.5)


def _strategies(placed: Placement, n: int, strategy: str, cpus: float) -> list[Any]:
    if strategy != "strict-spread":
        return ["SPREAD"] * n
    import ray
    from ray.util import placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    placed.group = placement_group([{"CPU": cpus}] * n, strategy="STRICT_SPREAD")
    done, _ = ray.wait([placed.group.ready()], timeout=START_TIMEOUT)
    if not done:
        nodes = sum(1 for node in ray.nodes() if node.get("Alive"))
        raise ConfigError(
            f"--ray-strategy strict-spread: {n} workers need {n} nodes with {cpus:g} free "
            f"CPU each; the cluster has {nodes} node(s)"
        )
    return [
        PlacementGroupSchedulingStrategy(placed.group, placement_group_bundle_index=i)
        for i in range(n)
    ]


def release(placed: Placement | None, *, leave: bool) -> None:
    """Stop the workers, free their placement group, and leave the cluster (``leave``:
    only when this run joined it)."""
    if not ray_installed():
        return
    import ray
    from ray.util import remove_placement_group

    if placed is not None:
        for a in placed.actors:
            ray.kill(a)
        placed.actors = []
        if placed.group is not None:
            remove_placement_group(placed.group)
            placed.group = None
    if leave and ray.is_initialized():
        ray.shutdown()


def _check_reachable(address: str) -> None:
    """A HOST:PORT nobody listens on is one clear line at once (Ray itself would retry
    for a minute, logging as it goes)."""
    host, sep, port = address.rpartition(":")
    if not sep or "://" in address or not port.isdigit():
        return  # "auto", or a ray:// client address: Ray resolves those
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=5.0).close()
    except OSError as e:
        raise ConfigError(
            f"--ray {address}: no Ray cluster answers there ({e.strerror or e}); start one "
            "with `ray start --head` or give its address"
        ) from None


def _check_reach(base_url: str, where: list[dict[str, Any]]) -> None:
    """A loopback server is out of reach of workers on other hosts: say so before any
    load, instead of a level of connection errors."""
    server = urlsplit(base_url).hostname or ""
    away = sorted({str(w["ip"]) for w in where if not is_loopback(str(w["ip"]))})
    if is_loopback(server) and away:
        raise ConfigError(
            f"--ray: the server ({base_url}) is a loopback address, out of reach of the "
            f"workers on {', '.join(away)}; give --url as those hosts see it"
        )


async def resolve(ref: Any) -> Any:
    """Await a Ray object reference (works on any asyncio loop, uvloop included)."""
    return await ref


def last_line(e: BaseException) -> str:
    """A remote error's last line (a traceback's conclusion), cut to one line."""
    text = str(e).strip()
    return text.splitlines()[-1][:300] if text else type(e).__name__
