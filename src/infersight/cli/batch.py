"""``infersight batch``: run a JSONL file of requests, resumable and within budget."""

from __future__ import annotations

from pathlib import Path

import typer


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
        import sys

        from rich.console import Console

        from infersight.batch import BatchConfig, render_summary, run_batch
        from infersight.batch.input import BadInput
        from infersight.batch.prepare import plan_batch
        from infersight.batch.progress import make_progress
        from infersight.core.errors import ConfigError
        from infersight.report import write_json

        if on_bad_line is not None and on_bad_line not in ("stop", "skip"):
            raise ConfigError(f"--on-bad-line must be stop or skip, not {on_bad_line!r}")
        given = dict(
            url=url, api_key_env=api_key_env, api_key_file=api_key_file,
            model=model, max_tokens=max_tokens, concurrency=concurrency,
            start_concurrency=start_concurrency, min_concurrency=min_concurrency,
            max_concurrency=max_concurrency, max_latency=max_latency, ttft_slo=ttft_slo,
            tpot_slo=tpot_slo, max_cost=max_cost, prices=prices, price_in=price_in,
            price_out=price_out, on_bad_line=on_bad_line, max_attempts=max_attempts,
            timeout=timeout, grace=grace, engine_parallel=parallel,
            retry_failed=retry_failed or None, quiet=quiet or None,
        )
        # Only flags actually given: the rest come from INFERSIGHT_BATCH_* or defaults.
        cfg = BatchConfig.build(input=input, output=out, **{k: v for k, v in given.items() if v is not None})
        try:
            if dry_run:
                plan = plan_batch(cfg, lock=False)
                for b in plan.scan.bad:
                    typer.echo(f"{input}: {b}", err=True)
                typer.echo(
                    f"{plan.scan.rows} valid rows, {len(plan.scan.bad)} bad lines, "
                    f"{len(plan.state.done)} already in {out}, {len(plan.todo)} to run"
                )
                return
            summary = run_batch(cfg, handle_signals=True, progress=make_progress(quiet=cfg.quiet))
        except BadInput as e:
            for b in e.bad_lines[:50]:
                typer.echo(f"{input}: {b}", err=True)
            if len(e.bad_lines) > 50:
                typer.echo(f"... and {len(e.bad_lines) - 50} more bad lines", err=True)
            raise
        if summary.skipped_bad:
            for bad in summary.bad_lines[:50]:
                typer.echo(f"{input}: skipped line {bad['line']}: {bad['reason']}", err=True)
        if summary_json is not None:
            write_json(summary_json, summary)
        Console(file=sys.stdout).print(render_summary(summary))
        raise typer.Exit(summary.exit_code)
