"""``infersight batch``: run a JSONL file of requests, resumable and within budget."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from infersight.cli._conventions import (
    api_key_env_option,
    api_key_file_option,
    command_help,
    duration_option,
    out_option,
)

if TYPE_CHECKING:
    from infersight.batch import BatchConfig


_HELP = command_help(
    "Run a file of prompts through an endpoint, resumably.",
    "Every line is validated before anything is sent. Results stream to OUT as they "
    "complete, one OpenAI Batch output line per row (fsync'ed): rerun the same command "
    "to resume (rows already in OUT are skipped; a torn last line from a crash is cut). "
    "Rows that failed after retries are written with error.code = the error kind; "
    "--retry-failed runs only those, appending their new lines (the last line of a "
    "custom_id wins) and compacting OUT to one line per row at the end. The first "
    "Ctrl-C stops sending and waits --grace for rows in flight; a second one cancels them.",
    "Without --concurrency the concurrency adapts to the latency goals. Exit 0 when "
    "every row is done, 1 when rows failed or were left (budget), 130 on Ctrl-C, 2 on "
    "bad input.",
    examples=[
        "infersight batch prompts.jsonl -o results.jsonl",
        "infersight batch prompts.jsonl -o results.jsonl --url URL --ttft-slo 500ms",
        "infersight batch prompts.jsonl -o results.jsonl --max-cost 5 --retry-failed",
    ],
)


def register(app: typer.Typer) -> None:
    """Add ``batch`` to the app."""

    @app.command("batch", help=_HELP)
    def batch(
        input: Path = typer.Argument(
            ...,
            metavar="INPUT",
            help="JSONL: OpenAI Batch lines, or one prompt / messages list per line.",
        ),
        out: Path = out_option(
            ..., help="Output JSONL (OpenAI Batch output format). A rerun resumes it."
        ),
        url: str | None = typer.Option(
            None,
            metavar="URL",
            help="The server's root URL, e.g. http://127.0.0.1:8000.",
            show_default="start the embedded engine",
        ),
        api_key_env: str | None = api_key_env_option(),
        api_key_file: str | None = api_key_file_option(),
        model: str | None = typer.Option(
            None, help="Model for rows that name none.", show_default="the server's first"
        ),
        max_tokens: int | None = typer.Option(None, help="max_tokens for rows that set none."),
        concurrency: int | None = typer.Option(
            None,
            "--concurrency",
            help="Fixed number of requests kept in flight.",
            show_default="adaptive",
        ),
        start_concurrency: int | None = typer.Option(
            None, help="Adaptive: where to start.", show_default="2"
        ),
        min_concurrency: int | None = typer.Option(
            None, help="Adaptive: the lower bound.", show_default="1"
        ),
        max_concurrency: int | None = typer.Option(
            None, help="Adaptive: at most this many requests in flight.", show_default="256"
        ),
        max_latency: float | None = duration_option(
            None, "--max-latency", help="Adaptive: keep p90 request latency under this."
        ),
        ttft_slo: float | None = duration_option(
            None, "--ttft-slo", help="Adaptive: keep p90 TTFT under this; streams requests."
        ),
        tpot_slo: float | None = duration_option(
            None, "--tpot-slo", help="Adaptive: keep p90 TPOT under this; streams requests."
        ),
        max_cost: float | None = typer.Option(
            None, help="Stop scheduling rows when the projected total $ would exceed this."
        ),
        prices: Path | None = typer.Option(
            None, metavar="FILE", help="Price table TOML ($ per million tokens per model)."
        ),
        price_in: float | None = typer.Option(None, help="Flat $ per million input tokens."),
        price_out: float | None = typer.Option(None, help="Flat $ per million output tokens."),
        on_bad_line: str | None = typer.Option(
            None,
            metavar="stop|skip",
            help="What an invalid input line does: stop the run, or skip the line.",
            show_default="stop",
        ),
        retry_failed: bool = typer.Option(
            False, "--retry-failed", help="Run again only the rows the output holds as failed."
        ),
        max_attempts: int | None = typer.Option(
            None,
            help="Attempts per row for retryable errors (429, 503, connect...).",
            show_default="5",
        ),
        timeout: float | None = duration_option(
            None, "--timeout", help="How long one attempt may take.", show_default="10m"
        ),
        grace: float | None = duration_option(
            None,
            "--grace",
            help="How long Ctrl-C waits for rows in flight before cancelling them.",
            show_default="10s",
        ),
        parallel: int | None = typer.Option(
            None,
            help="Embedded engine: slots, requests decoded together (without --url).",
            show_default="8",
        ),
        summary_json: Path | None = typer.Option(
            None, metavar="FILE", help="Also write the summary as JSON here."
        ),
        dry_run: bool = typer.Option(
            False, "--dry-run", help="Only validate the input and show what would run."
        ),
        quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress output."),
    ) -> None:
        flags = dict(locals())  # first statement: exactly the flags, by name
        from infersight.entrypoints.batch import dry_run_batch, run_batch_command

        cfg = _config(flags)
        if dry_run:
            dry_run_batch(cfg)
            return
        raise typer.Exit(run_batch_command(cfg, summary_json=summary_json))


#: Flags whose BatchConfig field has another name; None: not a BatchConfig field.
_FIELDS: dict[str, str | None] = {
    "out": "output",
    "parallel": "engine_parallel",
    "summary_json": None,
    "dry_run": None,
}


def _config(flags: dict[str, Any]) -> BatchConfig:
    from infersight.batch import BatchConfig

    given = {f: v for k, v in flags.items() if (f := _FIELDS.get(k, k)) is not None}
    # Only flags actually given (false switches are not given): the rest come from
    # INFERSIGHT_BATCH_* or the defaults.
    return BatchConfig.build(**{k: v for k, v in given.items() if v is not None and v is not False})
