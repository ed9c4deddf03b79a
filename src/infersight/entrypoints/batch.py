"""``infersight batch`` as a function: validate, run on a server, report, exit code."""

from __future__ import annotations

import sys
from pathlib import Path

from rich.console import Console

from infersight.batch import BatchConfig, render_summary, run_batch
from infersight.batch.input import BadInput
from infersight.batch.prepare import prepare_job
from infersight.batch.progress import make_progress
from infersight.entrypoints.engine import EngineOptions, engine_opener
from infersight.report import write_json

__all__ = ["dry_run_batch", "run_batch_command"]

#: Bad input lines shown on stderr before "... and N more".
_SHOWN_BAD_LINES = 50


def _err(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def dry_run_batch(cfg: BatchConfig) -> None:
    """Validate the input and say what a run would do; send nothing."""
    job = prepare_job(cfg, lock=False)
    for b in job.scan.bad:
        _err(f"{cfg.input}: {b}")
    print(
        f"{job.scan.rows} valid rows, {len(job.scan.bad)} bad lines, "
        f"{len(job.state.done)} already in {cfg.output}, {len(job.todo)} to run"
    )


def run_batch_command(cfg: BatchConfig, *, summary_json: Path | None = None) -> int:
    """Run the batch on ``cfg.url``, or on the embedded engine started once there are
    rows to run; print the summary; return the exit code (0 all done, 1 rows failed or
    left)."""
    progress = make_progress(quiet=cfg.quiet, interval=cfg.progress_interval)
    opener = None
    if cfg.url is None:
        opener = engine_opener(
            EngineOptions(parallel=cfg.engine_parallel),
            command="batch",
            on_start=lambda: progress.note("no --url: starting the embedded engine for this run"),
        )
    try:
        summary = run_batch(cfg, handle_signals=True, progress=progress, endpoint=opener)
    except BadInput as e:
        for b in e.bad_lines[:_SHOWN_BAD_LINES]:
            _err(f"{cfg.input}: {b}")
        if len(e.bad_lines) > _SHOWN_BAD_LINES:
            _err(f"... and {len(e.bad_lines) - _SHOWN_BAD_LINES} more bad lines")
        raise
    if summary.skipped_bad:
        for bad in summary.bad_lines[:_SHOWN_BAD_LINES]:
            _err(f"{cfg.input}: skipped line {bad['line']}: {bad['reason']}")
    if summary_json is not None:
        write_json(summary_json, summary)
    Console(file=sys.stdout).print(render_summary(summary))
    return summary.exit_code
