"""``infersight batch``: run a JSONL file of requests, resumable and within budget."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from infersight.cli._conventions import command_help
from infersight.cli.flag_options import command, declared_options, parameter
from infersight.flags.batch import BatchConfig

# entrypoints is imported in the command: at the top it adds ~1.8 s to `infersight --help`.

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


_OWN = [
    parameter(
        "summary_json",
        Path | None,
        typer.Option(None, metavar="FILE", help="Also write the summary as JSON here."),
    ),
    parameter(
        "dry_run",
        bool,
        typer.Option(False, "--dry-run", help="Only validate the input and show what would run."),
    ),
]
#: batch's options: the settings' fields, then the command's own.
PARAMETERS = [*declared_options(BatchConfig), *_OWN]


def register(app: typer.Typer) -> None:
    """Add ``batch`` to the app."""

    @app.command("batch", help=_HELP)
    @command(PARAMETERS)
    def batch(**flags: Any) -> None:
        from infersight.entrypoints.batch import dry_run_batch, run_batch_command

        summary_json, dry_run = flags.pop("summary_json"), flags.pop("dry_run")
        # Only flags actually given: the rest come from INFERSIGHT_BATCH_* or the defaults.
        cfg = BatchConfig.build(**{k: v for k, v in flags.items() if v is not None})
        if dry_run:
            dry_run_batch(cfg)
            return
        raise typer.Exit(run_batch_command(cfg, summary_json=summary_json))
