"""``run_batch``: validate, connect to the endpoint, run, summarise.

The server is the endpoint the caller gives (the CLI starts the embedded engine when
no ``--url`` is given, only once there are rows to run), else ``cfg.url``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from infersight.batch.input import BatchRow, RowDefaults, iter_rows
from infersight.batch.output import OutputWriter, compact_output, load_output
from infersight.batch.prepare import BatchJob, make_meter, prepare_job, prior_cost
from infersight.batch.progress import BatchProgress, make_progress
from infersight.batch.runner import RowRunner
from infersight.batch.summary import BatchSummary
from infersight.client import Client, RetryPolicy, Timeouts, resolve_api_key
from infersight.control.adaptive import AdaptiveConcurrency
from infersight.control.controller import ConcurrencyController, FixedConcurrency
from infersight.core.endpoint import Endpoint, EndpointOpener
from infersight.core.errors import AuthError, ConfigError, ConnectError, InfersightError, Timeout
from infersight.flags.batch import BatchConfig

__all__ = ["run_batch", "run_batch_async"]


def _rows(job: BatchJob, model: str | None) -> Iterator[BatchRow]:
    defaults = RowDefaults(model=job.cfg.model or model, max_tokens=job.cfg.max_tokens)
    for row in iter_rows(job.cfg.input, skip_lines=job.scan.bad_line_numbers, defaults=defaults):
        if row.custom_id in job.todo:
            yield row


def _api_key(cfg: BatchConfig) -> str | None:
    """--api-key-env/--api-key-file (then required), else $INFERSIGHT_API_KEY(_FILE)."""
    if cfg.api_key_env or cfg.api_key_file:
        return resolve_api_key(env=cfg.api_key_env, file=cfg.api_key_file, required=True)
    return resolve_api_key(env="INFERSIGHT_API_KEY", file=os.environ.get("INFERSIGHT_API_KEY_FILE"))


def _controller(cfg: BatchConfig, now: float) -> ConcurrencyController:
    if cfg.concurrency is not None:
        return FixedConcurrency(cfg.concurrency, now=now)
    return AdaptiveConcurrency(
        now=now,
        initial=cfg.start_concurrency,
        minimum=cfg.min_concurrency,
        maximum=cfg.max_concurrency,
        max_latency=cfg.max_latency,
        ttft_slo=cfg.ttft_slo,
        tpot_slo=cfg.tpot_slo,
    )


async def _preflight(client: Any, url: str) -> str | None:
    """Reach the server and learn its model; unreachable or 401 -> ConfigError."""
    try:
        models: list[str] = await client.models()
    except AuthError as e:
        raise ConfigError(
            f"{url} rejected the API key (HTTP {e.status}): set the right key with "
            "--api-key-env/--api-key-file"
        ) from None
    except (ConnectError, Timeout) as e:
        raise ConfigError(str(e)) from None  # "cannot connect to HOST:PORT: why"
    except InfersightError:
        return None  # no /v1/models on this server: rows must name their model
    return models[0] if models else None


def _summary(
    job: BatchJob, runner: RowRunner | None, meter: Any, ctrl: Any, **kw: Any
) -> BatchSummary:
    cfg, scan = job.cfg, job.scan
    s = BatchSummary(
        input=str(cfg.input),
        output=str(cfg.output),
        max_cost=cfg.max_cost,
        rows_in_input=scan.rows,
        bad_lines=[
            {"line": b.line, "reason": b.reason, "custom_id": b.custom_id} for b in scan.bad
        ],
        skipped_bad=len(scan.bad),
        already_done=len((set(job.state.done) - job.state.input_errors) & scan.ids)
        - (len(job.todo - job.state.input_errors) if cfg.retry_failed else 0),
        to_do=len(job.todo),
        repaired_bytes=job.state.repaired_bytes,
        compacted_lines=job.compacted,
        foreign_ids=job.foreign,
        notes=list(job.notes),
        concurrency_mode="fixed" if cfg.concurrency else "adaptive",
        **kw,
    )
    if runner is None:
        s.cost_total = prior_cost(job.state, job.prices, job.state.ok_ids)
    else:
        elapsed = (runner.t_last or 0.0) - (runner.t_first or 0.0)
        s.done, s.failed, s.attempts, s.retries = (
            runner.done,
            runner.failed,
            runner.attempts,
            runner.retries,
        )
        s.not_run = s.to_do - s.done - s.failed
        s.errors_by_kind, s.failed_by_kind = dict(runner.errors), dict(runner.failed_by_kind)
        s.stopped = runner.stopped
        s.partial = runner.stopped != "completed"
        s.elapsed_s = round(max(0.0, elapsed), 3)
        if elapsed > 0:
            s.rows_per_s = (s.done + s.failed) / elapsed
            s.output_tokens_per_s = meter.completion_tokens / elapsed
        s.prompt_tokens, s.completion_tokens = meter.prompt_tokens, meter.completion_tokens
        s.cost = None if meter.unpriced else meter.spent
        s.cost_total = None if meter.unpriced else meter.total
        s.unpriced_models = sorted(meter.unpriced)
        s.concurrency_settled = ctrl.settled(runner.t_last or time.monotonic())
        s.concurrency_final, s.concurrency_max = ctrl.limit, runner.max_limit
        s.decisions = [d.to_dict() for d in ctrl.decisions]
        if ctrl.history:  # the start, then one entry per change (never truncated)
            s.concurrency_start = ctrl.history[0][1]
            s.concurrency_changes = len(ctrl.history) - 1
    final = load_output(cfg.output, repair=False)
    s.output_rows_ok = len(final.ok_ids & scan.ids)
    s.output_rows_failed = len(final.failed_ids & scan.ids)
    if s.output_rows_failed:
        s.notes.append(
            f"{s.output_rows_failed} rows in {cfg.output} failed: rerun with --retry-failed"
        )
    if s.not_run and s.stopped == "budget":
        s.notes.append(f"{s.not_run} rows not run: raise --max-cost and rerun to continue")
    elif s.not_run and s.stopped == "interrupted":
        s.notes.append(f"{s.not_run} rows not run: rerun the same command to resume")
    return s


def _opener(cfg: BatchConfig, endpoint: Endpoint | EndpointOpener | None) -> EndpointOpener:
    if endpoint is None or isinstance(endpoint, Endpoint):
        given = endpoint or Endpoint.required(cfg.url, command="batch")

        @contextlib.asynccontextmanager
        async def opened() -> AsyncIterator[Endpoint]:
            yield given

        return opened
    return endpoint


async def run_batch_async(
    cfg: BatchConfig,
    *,
    endpoint: Endpoint | EndpointOpener | None = None,
    progress: BatchProgress | None = None,
    on_runner: Callable[[RowRunner], None] | None = None,
) -> BatchSummary:
    """Run a batch; ``on_runner`` receives the runner (e.g. to wire Ctrl-C to it).

    ``endpoint`` is the server (default: ``cfg.url``), or an opener called only when
    there are rows to run (the CLI's embedded engine starts then, not for a rerun
    that finds everything done).
    """
    opener = _opener(cfg, endpoint)
    job = prepare_job(cfg)
    try:
        return await _run_job(job, progress, on_runner, opener)
    finally:
        if job.lock is not None:
            job.lock.release()


async def _run_job(
    job: BatchJob,
    progress: BatchProgress | None,
    on_runner: Callable[[RowRunner], None] | None,
    opener: EndpointOpener,
) -> BatchSummary:
    cfg = job.cfg
    if not job.todo:
        return _summary(job, None, None, None, stopped="nothing-to-do")
    prog = progress or make_progress(quiet=True)
    api_key = _api_key(cfg)
    async with opener() as ep:
        url = ep.url
        client = Client(
            url,
            api_key=api_key or ep.api_key,
            timeouts=Timeouts(connect=10.0, total=cfg.timeout),
            retry=RetryPolicy.none(),
        )
        async with client:
            model = cfg.model or await _preflight(client, url)
            meter = make_meter(job, model)
            ctrl = _controller(cfg, time.monotonic())
            writer = OutputWriter(cfg.output, fsync=cfg.fsync)
            stream = cfg.ttft_slo is not None or cfg.tpot_slo is not None
            runner = RowRunner(
                client,
                _rows(job, model),
                ctrl=ctrl,
                meter=meter,
                writer=writer,
                progress=prog,
                retry=RetryPolicy(
                    max_attempts=cfg.max_attempts, base_delay=0.5, max_delay=30.0, budget=None
                ),
                stream=stream,
                default_model=model,
            )
            if on_runner is not None:
                on_runner(runner)
            prog.start(len(job.todo))
            try:
                await runner.run()
            finally:
                prog.stop()
                writer.close()
                if cfg.retry_failed:
                    job.compacted += await asyncio.to_thread(compact_output, cfg.output)
        summary = _summary(job, runner, meter, ctrl, url=url, model=model)
        if runner.fatal is not None:
            raise ConfigError(
                f"{url} rejected the API key (HTTP 401/403) mid-run: {summary.done} rows "
                f"written; fix the key and rerun to resume"
            )
        return summary


def run_batch(
    cfg: BatchConfig | None = None,
    /,
    *,
    handle_signals: bool = False,
    progress: BatchProgress | None = None,
    endpoint: Endpoint | EndpointOpener | None = None,
    **options: Any,
) -> BatchSummary:
    """Run a batch synchronously: ``run_batch(input=..., output=..., url=...)``.

    With ``handle_signals`` the first SIGINT/SIGTERM stops scheduling and waits
    ``grace`` seconds for rows in flight, the second cancels them; the output stays
    consistent either way.
    """
    config = cfg or BatchConfig.build(**options)

    async def main() -> BatchSummary:
        loop = asyncio.get_running_loop()

        def wire(runner: RowRunner) -> None:
            if handle_signals:
                for sig in (signal.SIGINT, signal.SIGTERM):
                    loop.add_signal_handler(sig, runner.request_stop, config.grace, sig)

        try:
            return await run_batch_async(
                config, endpoint=endpoint, progress=progress, on_runner=wire
            )
        finally:
            if handle_signals:
                for sig in (signal.SIGINT, signal.SIGTERM):
                    with contextlib.suppress(Exception):
                        loop.remove_signal_handler(sig)

    return asyncio.run(main())
