"""``infersight batch``: run a JSONL file of requests, resumable and within budget."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:
    from infersight.batch import BatchConfig


def register(app: typer.Typer) -> None:
    """Add ``batch`` to the app."""

    @app.command("batch")
    def batch(
        input: Path = typer.Argument(..., help="JSONL: OpenAI Batch lines, or one prompt / messages list per line."),
        out: Path = typer.Option(..., "--out", "-o", help="Output JSONL (OpenAI Batch output format). A rerun resumes it."),
        url: str | None = typer.Option(None, help="Server root, e.g. http://127.0.0.1:8000. Default: start the embedded engine."),
        api_key_env: str | None = typer.Option(None, help="Env var holding the API key."),
        api_key_file: str | None = typer.Option(None, help="File holding the API key."),
        model: str | None = typer.Option(None, help="Model for rows that name none (default: the server's first)."),
        max_tokens: int | None = typer.Option(None, help="max_tokens for rows that set none."),
        concurrency: int | None = typer.Option(None, "--concurrency", "-c", help="Fixed concurrency (default: adaptive)."),
        start_concurrency: int | None = typer.Option(None, help="Adaptive: where to start [2]."),
        min_concurrency: int | None = typer.Option(None, help="Adaptive: lower bound [1]."),
        max_concurrency: int | None = typer.Option(None, help="Adaptive: upper bound [256]."),
        max_latency: float | None = typer.Option(None, help="Adaptive: keep p90 request latency under this (s)."),
        ttft_slo: float | None = typer.Option(None, help="Adaptive: keep p90 TTFT under this (s); streams requests."),
        tpot_slo: float | None = typer.Option(None, help="Adaptive: keep p90 TPOT under this (s); streams requests."),
        max_cost: float | None = typer.Option(None, help="Stop scheduling rows when the projected total $ would exceed this."),
        prices: Path | None = typer.Option(None, help="Price table TOML ($ per million tokens per model)."),
        price_in: float | None = typer.Option(None, help="Flat $ per million input tokens."),
        price_out: float | None = typer.Option(None, help="Flat $ per million output tokens."),
        on_bad_line: str | None = typer.Option(None, help="stop [default] or skip invalid input lines."),
        retry_failed: bool = typer.Option(False, "--retry-failed", help="Run again only the rows the output holds as failed."),
        max_attempts: int | None = typer.Option(None, help="Attempts per row for retryable errors (429, 503, connect...) [5]."),
        timeout: float | None = typer.Option(None, help="Seconds one attempt may take [600]."),
        grace: float | None = typer.Option(None, help="Seconds Ctrl-C waits for rows in flight before cancelling them [10]."),
        parallel: int | None = typer.Option(None, help="Slots of the embedded engine (without --url) [8]."),
        summary_json: Path | None = typer.Option(None, help="Also write the summary as JSON here."),
        dry_run: bool = typer.Option(False, "--dry-run", help="Only validate the input and show what would run."),
        quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress output."),
    ) -> None:
        """Run a file of prompts through an endpoint as fast as it takes, resumably.

        Every line is validated before anything is sent. Results stream to OUT as
        they complete, one OpenAI Batch output line per row (fsync'ed): rerun the same
        command to resume (rows already in OUT are skipped; a torn last line from a
        crash is cut). Rows that failed after retries are written with error.code =
        the error kind; --retry-failed runs only those, appending their new lines
        (the last line of a custom_id wins) and compacting OUT to one line per row at
        the end. The first Ctrl-C stops sending and waits --grace s for rows in
        flight; a second one cancels them.

        Exit 0 when every row is done, 1 when rows failed or were left (budget),
        130 on Ctrl-C, 2 on bad input.
        """
        flags = dict(locals())  # first statement: exactly the flags, by name
        from infersight.entrypoints.batch import dry_run_batch, run_batch_command

        cfg = _config(flags)
        if dry_run:
            dry_run_batch(cfg)
            return
        raise typer.Exit(run_batch_command(cfg, summary_json=summary_json))


#: Flags whose BatchConfig field has another name; None: not a BatchConfig field.
_FIELDS: dict[str, str | None] = {"out": "output", "parallel": "engine_parallel", "summary_json": None, "dry_run": None}


def _config(flags: dict[str, Any]) -> BatchConfig:
    from infersight.batch import BatchConfig

    given = {f: v for k, v in flags.items() if (f := _FIELDS.get(k, k)) is not None}
    # Only flags actually given (false switches are not given): the rest come from
    # INFERSIGHT_BATCH_* or the defaults.
    return BatchConfig.build(**{k: v for k, v in given.items() if v is not None and v is not False})
