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
import signal
import uuid
from typing import Any

from infersight.bench.colocation import cpu_contention
from infersight.bench.config import BenchConfig
from infersight.bench.datasets import PromptSource
from infersight.bench.distributed.ray_workers import RayLevelOutcome, ray_pool
from infersight.bench.level.order import LevelOrder
from infersight.bench.level.run import Executor, run_fixed_level
from infersight.bench.level.spec import fixed_levels
from infersight.bench.progress import LiveDisplay
from infersight.bench.replay.aggregate import replay_aggregate, shared_prefix_sharing
from infersight.bench.replay.prepare import ReplaySetup, prepare_replay, run_replay_level
from infersight.bench.run_result import finish_result
from infersight.bench.runtime import ClientSpec, make_client, run_coroutine
from infersight.bench.stop import Stop
from infersight.bench.target import Target
from infersight.bench.target_check import open_target
from infersight.bench.telemetry import BenchTelemetry
from infersight.core.endpoint import Endpoint
from infersight.core.errors import InfersightError
from infersight.core.records import ClockAnchor, RunResult
from infersight.stats.aggregate import Window, aggregate

__all__ = ["run", "run_async"]


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
    ``config.target.url``; bench itself never starts one.
    """
    cfg = config
    endpoint = endpoint or Endpoint.required(cfg.target.url, command="bench")
    stop = Stop()
    loop = asyncio.get_running_loop()
    handled: list[signal.Signals] = []
    # SIGTERM (a scheduler or `timeout` stopping the run) is treated like Ctrl-C:
    # stop scheduling, let requests in flight finish within the grace, keep everything.
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop.press, sig)
            handled.append(sig)
    try:
        target = await open_target(cfg.target, cfg.telemetry, endpoint)
        return await _run_with_target(cfg, target, stop, display or LiveDisplay(False))
    finally:
        for sig in handled:
            loop.remove_signal_handler(sig)


async def _run_with_target(
    cfg: BenchConfig, target: Target, stop: Stop, display: LiveDisplay
) -> RunResult:
    # The one place that splits the configuration: every module below receives the
    # sections it reads (flags/bench.py).
    load, workload, dist = cfg.load, cfg.workload, cfg.distribution
    setup = ReplaySetup(cfg.replay, workload, load, cfg.target)
    result = RunResult(kind="bench", run_id=uuid.uuid4().hex[:12], clock=ClockAnchor())
    spec = ClientSpec(
        target.base_url,
        target.api_key,
        target.api_key_source,
        max_connections=load.max_concurrency,
        usage_per_chunk=target.engine_info.get("engine") == "vllm",
        # "llama.cpp": the embedded engine's settings; "llamacpp": detected from /metrics
        timings_per_token=target.engine_info.get("engine") in ("llama.cpp", "llamacpp"),
    )
    result.notes.extend(target.notes)
    order = LevelOrder(
        load, fixed_levels(load, setup.replay), cfg.target.engine_slots or target.slots
    )
    window = Window.parse(load.warmup, load.cooldown)
    contention = cpu_contention(target.base_url, target.engine_pid)
    if contention:
        result.environment["cpu_contention"] = contention
    interval = cfg.telemetry.sample_interval
    async with (
        make_client(spec) as client,
        ray_pool(dist, spec, sample_interval=interval) as pool,
    ):
        execute = Executor(client, spec, stop, pool, dist.workers)
        tokenize = client.tokenize if workload.dataset is None else None
        prompts = PromptSource(
            input_tokens=workload.input_tokens,
            output_tokens=workload.output_tokens,
            max_tokens=workload.max_tokens,
            dataset=workload.dataset,
            shared_prefix=workload.shared_prefix,
            seed=workload.seed,
            tokenize=_safe_tokenize(tokenize),
        )
        replay = None
        if setup.replay.active:  # the trace itself was checked with the config
            replay = await prepare_replay(
                setup, client, target.path, target.model, _safe_tokenize(client.tokenize)
            )
        else:
            await prompts.prepare()
        telemetry = BenchTelemetry(cfg.telemetry, target, workers=dist.workers)
        await telemetry.start()
        levels_done: list[dict[str, Any]] = []
        remote_samples: list[Any] = []
        try:
            with display:
                while not stop.stop and (level := order.next()) is not None:
                    replayed: dict[str, Any] = {}
                    if replay is not None:
                        outcome, replayed = await run_replay_level(
                            setup,
                            level,
                            replay,
                            target,
                            _safe_tokenize(client.tokenize),
                            execute,
                            display,
                        )
                    else:
                        outcome = await run_fixed_level(
                            load, workload, setup.target, target, level, prompts, execute, display
                        )
                    remote = outcome if isinstance(outcome, RayLevelOutcome) else None
                    result.records.extend(outcome.records)
                    agg = aggregate(
                        outcome.records,
                        window=window,
                        slo=dict(load.slo) or None,
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
                    elif workload.shared_prefix:
                        agg["prefix_sharing"] = shared_prefix_sharing(
                            outcome.records, workload.shared_prefix
                        )
                    result.aggregates[level.name] = agg
                    order.record(level, agg)
                    levels_done.append(
                        {
                            **level.as_dict(),
                            "wall_s": outcome.wall,
                            "loadgen_cpu_s": outcome.cpu_seconds,
                            "workers": dist.workers,
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
    # The RunResult keeps the configuration flat, as the user gave it.
    flat = cfg.as_dict()
    del flat["api_key_env"], flat["api_key_file"]
    finish_result(result, flat, target, prompts, order, levels_done, stop)
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
