"""``infersight.bench.run``: one benchmark run from configuration to RunResult.

Order of work: check the target (one-line errors before any load), prepare prompts,
start telemetry (host every second, the engine's /metrics), run each level (fixed
list, sweep or find-max), aggregate, price it, and return the RunResult (the caller
chains the diagnosis: see ``infersight.entrypoints.bench``). Ctrl-C stops scheduling,
waits ``grace`` seconds for requests in flight, marks the rest cancelled and still
returns everything (``partial=True``); a second Ctrl-C skips the grace period.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import platform
import signal
import time
import uuid
from typing import Any

from infersight.bench.colocation import cpu_contention
from infersight.bench.config import BenchConfig
from infersight.bench.datasets import PromptSource
from infersight.bench.distributed.ray_workers import RayLevelOutcome, RayWorkers, ray_pool
from infersight.bench.distributed.workers import run_level_in_workers
from infersight.bench.executor import run_level
from infersight.bench.level_plan import LevelOutcome, LevelPlan
from infersight.bench.level_spec import LevelSpec
from infersight.bench.planner import LevelPlanner
from infersight.bench.progress import LiveDisplay, LiveStats
from infersight.bench.replay_level import replay_aggregate, shared_prefix_sharing
from infersight.bench.replay_plan import prepare_replay, run_replay_level
from infersight.bench.runtime import ClientSpec, make_client, run_coroutine
from infersight.bench.schedule import open_loop_schedule
from infersight.bench.target import Target
from infersight.bench.target_check import open_target
from infersight.bench.telemetry import BenchTelemetry
from infersight.bench.workload import build_bodies
from infersight.core.endpoint import Endpoint
from infersight.core.errors import InfersightError
from infersight.core.interrupts import stop_text
from infersight.core.records import ClockAnchor, RunResult
from infersight.stats.aggregate import aggregate
from infersight.stats.cost import price_run
from infersight.stats.prefix_cache import add_engine_cache

__all__ = ["run", "run_async"]


class _Stop:
    """Ctrl-C state: the first press stops scheduling, the second skips the grace."""

    def __init__(self) -> None:
        self.stop = False
        self.hard = False
        self.during: str | None = None
        #: The signal that stopped the run (SIGINT, SIGTERM), for the note.
        self.signal: int | None = None

    def press(self, sig: int | None = None) -> None:
        if self.stop:
            self.hard = True
        self.stop = True
        self.signal = self.signal or sig


def run(config: BenchConfig, *, endpoint: Endpoint | None = None) -> RunResult:
    """Run a benchmark and return its RunResult (blocking; uses uvloop)."""
    return run_coroutine(run_async(config, endpoint=endpoint))


async def run_async(
    config: BenchConfig,
    *,
    endpoint: Endpoint | None = None,
    display: LiveDisplay | None = None,
) -> RunResult:
    """Run a benchmark inside the current event loop.

    The server is ``endpoint`` (what the CLI started or was given), else
    ``config.url``; bench itself never starts one.
    """
    cfg = config
    endpoint = endpoint or Endpoint.required(cfg.url, command="bench")
    stop = _Stop()
    loop = asyncio.get_running_loop()
    handled: list[signal.Signals] = []
    # SIGTERM (a scheduler or `timeout` stopping the run) is treated like Ctrl-C:
    # stop scheduling, let requests in flight finish within the grace, keep everything.
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop.press, sig)
            handled.append(sig)
    try:
        target = await open_target(cfg, endpoint)
        return await _run_with_target(cfg, target, stop, display or LiveDisplay(False))
    finally:
        for sig in handled:
            loop.remove_signal_handler(sig)


async def _run_with_target(
    cfg: BenchConfig, target: Target, stop: _Stop, display: LiveDisplay
) -> RunResult:
    result = RunResult(kind="bench", run_id=uuid.uuid4().hex[:12], clock=ClockAnchor())
    spec = ClientSpec(
        target.base_url,
        target.api_key,
        target.api_key_source,
        max_connections=cfg.max_concurrency,
    )
    result.notes.extend(target.notes)
    planner = LevelPlanner(cfg)
    window = cfg.window()
    contention = cpu_contention(target.base_url, target.engine_pid)
    if contention:
        result.environment["cpu_contention"] = contention
    async with make_client(spec) as client, ray_pool(cfg, spec) as pool:
        tokenize = client.tokenize if cfg.dataset is None else None
        prompts = PromptSource(
            input_tokens=cfg.input_tokens,
            output_tokens=cfg.output_tokens,
            max_tokens=cfg.max_tokens,
            dataset=cfg.dataset,
            shared_prefix=cfg.shared_prefix,
            seed=cfg.seed,
            tokenize=_safe_tokenize(tokenize),
        )
        replay = None
        if cfg.trace or cfg.sessions:  # the trace itself was checked with the config
            replay = await prepare_replay(
                cfg, client, target.path, target.model, _safe_tokenize(client.tokenize)
            )
        else:
            await prompts.prepare()
        telemetry = BenchTelemetry(cfg, target)
        await telemetry.start()
        levels_done: list[dict[str, Any]] = []
        remote_samples: list[Any] = []
        try:
            with display:
                while not stop.stop and (level := planner.next()) is not None:
                    replayed: dict[str, Any] = {}
                    if replay is not None:
                        outcome, replayed = await run_replay_level(
                            cfg,
                            level,
                            replay,
                            target,
                            _safe_tokenize(client.tokenize),
                            lambda plan, live, lead: _execute(
                                cfg, client, spec, plan, stop, live, pool, lead
                            ),
                            display,
                        )
                    else:
                        outcome = await _run_one(
                            cfg, target, client, spec, level, prompts, stop, display, pool
                        )
                    remote = outcome if isinstance(outcome, RayLevelOutcome) else None
                    result.records.extend(outcome.records)
                    agg = aggregate(
                        outcome.records,
                        window=window,
                        slo=cfg.slo or None,
                        target_concurrency=level.concurrency,
                        target_rate=replayed["rate"]
                        if replayed
                        else None
                        if level.rate is None or math.isinf(level.rate)
                        else level.rate,
                        loadgen_cpu_percent=outcome.cpu_percent,
                        check_lag=level.rate is None or not math.isinf(level.rate),
                        contention=contention,
                        workers=remote.loads() if remote else None,
                    )
                    if remote:
                        remote_samples += remote.samples
                    if replayed:
                        agg["replay"] = replay_aggregate(outcome.records, replayed["survey"])
                        agg["prefix_sharing"] = agg["replay"].pop("prefix_sharing")
                    elif cfg.shared_prefix:
                        agg["prefix_sharing"] = shared_prefix_sharing(
                            outcome.records, cfg.shared_prefix
                        )
                    result.aggregates[level.name] = agg
                    planner.record(level, agg)
                    levels_done.append(
                        {
                            **level.as_dict(),
                            "wall_s": outcome.wall,
                            "loadgen_cpu_s": outcome.cpu_seconds,
                            "workers": cfg.workers,
                        }
                    )
                    if stop.stop:
                        stop.during = level.name
        finally:
            if client.closes_after_stream:
                result.notes.append(
                    f"{client.closes_after_stream}: each streamed request used a new "
                    "connection (connecting counts in schedule lag, not in TTFT from sent)"
                )
            result.samples = await telemetry.stop()
            if pool is not None:  # the workers' hosts, clocks and samples
                result.samples = sorted(result.samples + remote_samples, key=lambda s: s.t)
                result.environment["ray"] = pool.describe()
                result.notes += [pool.summary(), *pool.notes]
            result.notes.extend(telemetry.notes)
            result.environment["gpus"] = telemetry.gpus
            if telemetry.gpu_note:
                result.environment["gpu_note"] = telemetry.gpu_note
    _finish(result, cfg, target, prompts, planner, levels_done, stop)
    if replay is not None:
        result.config["workload"] = replay.desc
        result.notes.extend(replay.notes)
    return result


def _safe_tokenize(fn: Any) -> Any:
    if fn is None:
        return None

    async def tokenize(text: str) -> list[int] | None:
        # Resends on dropped connections are the client's; an error here means the
        # target has no usable /tokenize: prompt lengths become approximate (noted).
        try:
            out: list[int] | None = await fn(text)
        except InfersightError:
            return None
        return out

    return tokenize


async def _run_one(
    cfg: BenchConfig,
    target: Target,
    client: Any,
    spec: ClientSpec,
    level: LevelSpec,
    prompts: PromptSource,
    stop: _Stop,
    display: LiveDisplay,
    pool: RayWorkers | None = None,
) -> LevelOutcome:
    n_req = cfg.effective_requests()
    slots: list[tuple[int, float]] = []
    if level.rate is not None:
        offsets = open_loop_schedule(
            level.rate,
            arrival=level.arrival,
            burstiness=cfg.burstiness,
            requests=n_req if n_req is not None or not math.isinf(level.rate) else 64,
            duration=None if math.isinf(level.rate) else cfg.duration,
            seed=cfg.seed,
        )
        slots = [(i, float(o)) for i, o in enumerate(offsets)]
        n_bodies = len(slots)
    else:
        assert level.concurrency is not None
        n_bodies = (
            n_req
            if n_req is not None
            else min(5000, level.concurrency * math.ceil(cfg.duration or 1) * 10)
        )
    bodies = build_bodies(
        await prompts.take(max(n_bodies, 1)),
        model=target.model,
        endpoint=cfg.endpoint,
        stream=cfg.stream,
        ignore_eos=cfg.ignore_eos,
    )
    plan = LevelPlan(
        name=level.name,
        path=target.path,
        bodies=bodies,
        concurrency=level.concurrency,
        slots=slots,
        duration=cfg.duration,
        limit=n_req,
        timeout=cfg.timeout,
        grace=cfg.grace,
    )
    live = LiveStats(total=len(slots) if slots else n_req, duration=cfg.duration)
    display.show(level.name, live)
    return await _execute(cfg, client, spec, plan, stop, live, pool)


async def _execute(
    cfg: BenchConfig,
    client: Any,
    spec: ClientSpec,
    plan: LevelPlan,
    stop: _Stop,
    live: LiveStats,
    pool: RayWorkers | None,
    lead: float = 0.01,
) -> LevelOutcome:
    """Run a level's plan in this process, in ``--workers`` processes or on Ray; a
    single process starts ``lead`` seconds from now."""
    if pool is not None:
        return await pool.run_level(
            plan, stop=lambda: stop.stop, hard_stop=lambda: stop.hard, live=live
        )
    if cfg.workers > 1:
        return await run_level_in_workers(
            spec,
            plan,
            workers=cfg.workers,
            stop=lambda: stop.stop,
            hard_stop=lambda: stop.hard,
            live=live,
        )
    return await run_level(
        client,
        plan,
        t0=time.monotonic() + lead,
        stop=lambda: stop.stop,
        hard_stop=lambda: stop.hard,
        live=live,
    )


def _finish(
    result: RunResult,
    cfg: BenchConfig,
    target: Target,
    prompts: PromptSource,
    planner: LevelPlanner,
    levels_done: list[dict[str, Any]],
    stop: _Stop,
) -> None:
    from infersight import __version__

    result.config = {
        **cfg.model_dump(mode="json", exclude={"api_key_env", "api_key_file"}),
        "api_key": "set" if target.api_key else "none",
        "model": target.model,
        "endpoint_path": target.path,
        "mode": planner.mode,
        "levels": levels_done,
        "engine": target.engine_info,
        "workload": prompts.desc,
    }
    fm = planner.summary()
    if fm is not None:
        result.config["find_max"] = fm
    result.versions = _versions(__version__)
    result.environment = {
        **result.environment,
        "host": platform.node(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "loadgen_pid": os.getpid(),
        "engine_pid": target.engine_pid,
    }
    reasons = []
    for name, agg in result.aggregates.items():
        reasons += [f"{name}: {r}" for r in agg["client_limited"]["reasons"]]
    result.client_limited = bool(reasons)
    result.client_limited_reasons = reasons
    if stop.stop:
        result.partial = True
        n_cancel = sum(1 for r in result.records if r.cancelled)
        result.notes.append(
            f"{stop_text(stop.signal)} during level {stop.during or '?'}: scheduling stopped, "
            f"{n_cancel} request(s) still in flight after the grace period were cancelled"
        )
    if not prompts.desc.get("lengths_exact", True):
        result.notes.append("prompt lengths are approximate: " + prompts.desc["lengths_note"])
    if "note" in prompts.desc:
        result.notes.append(prompts.desc["note"])
    add_engine_cache(result)  # the engine's prefix-cache hit rate, per level
    price_run(result)  # from the flags, --prices or the price table (config above)


def _versions(ours: str) -> dict[str, str]:
    from importlib import metadata

    out = {"infersight": ours, "python": platform.python_version()}
    for pkg in ("aiohttp", "uvloop", "numpy", "xllamacpp"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            out[pkg] = metadata.version(pkg)
    return out
