"""`infersight report`: a self-contained HTML report (and Markdown summary) of runs."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from infersight.cli import _prometheus as P
from infersight.cli._conventions import command_help, duration_option, out_option
from infersight.core.errors import ConfigError

if TYPE_CHECKING:
    from infersight.core.records import RunResult
    from infersight.entrypoints.prometheus import FleetQuery

# In the commands, not here: entrypoints (~1.8 s), report, diagnose (~0.2-0.45 s), rich (~20 ms).


_HELP = command_help(
    "Render a self-contained HTML report and Markdown summary.",
    "The page starts with the answer (the best sustainable operating point, the main "
    "verdict and its fix), then the evidence: verdicts, latency CDFs, timeline, cost. "
    "Several results are compared side by side (before/after table with deltas; the "
    "first is the baseline). The file opens offline: no scripts, fonts or images are "
    "fetched.",
    "With --prometheus, instead of files: a fleet report of every replica that Prometheus "
    "scrapes over a range, diagnosed per replica with a fleet summary.",
    examples=[
        "infersight report runs/demo/result.json -o report.html",
        "infersight report before.json after.json -l before -l after -m summary.md",
        "infersight report a.json b.json --threshold 3%",
        "infersight report result.json benchmarks.json -l ours -l guidellm",
        "infersight report --prometheus http://prom:9090 --since 6h -o fleet.html",
    ],
)


def register(app: typer.Typer) -> None:
    """Add this module's commands to the app."""

    @app.command("report", help=_HELP)
    def report(
        results: list[Path] = typer.Argument(
            None,
            metavar="RESULT",
            help=(
                "RunResult JSON files, or GuideLLM, AIPerf, vllm bench serve or inference-perf "
                "results (told by their content); with several, the first is the baseline of the "
                "comparison."
            ),
            show_default=False,
        ),
        out: Path = out_option(Path("report.html"), help="HTML file to write."),
        markdown: Path | None = typer.Option(
            None,
            "--markdown",
            "-m",
            metavar="FILE",
            help="Also write a Markdown summary for an issue.",
        ),
        label: list[str] | None = typer.Option(
            None,
            "--label",
            "-l",
            metavar="NAME",
            help="Name of each run in the comparison (repeatable).",
            show_default="run id or file name",
        ),
        diagnose: bool = typer.Option(
            True,
            "--diagnose/--no-diagnose",
            help="Diagnose a file that holds no verdicts before rendering it.",
        ),
        threshold: str = typer.Option(
            "5%",
            metavar="PCT",
            help=(
                "Comparison: a change whose 95% interval stays within this is no significant "
                "difference; give the spread an A/A pair of runs measured."
            ),
        ),
        prometheus: str = P.PROMETHEUS,
        since: str = P.SINCE,
        start: str = P.START,
        end: str = P.END,
        step: str = P.STEP,
        selector: str = P.SELECTOR,
        http_config: Path = P.HTTP_CONFIG,
        window: float = duration_option(
            None,
            "--window",
            help="With --prometheus: window length.",
            show_default="a sixtieth of the range, at most 15m",
        ),
    ) -> None:
        from infersight.importers import load_results
        from infersight.report import write_report

        if prometheus:
            _fleet_report(
                P.fleet_query(
                    prometheus,
                    since=since,
                    start=start,
                    end=end,
                    step=step,
                    selector=selector,
                    http_config=http_config,
                    window=window,
                ),
                out,
                has_files=bool(results),
            )
            return
        if not results:
            raise ConfigError("give RunResult files, or --prometheus URL")
        if label and len(label) != len(results):
            raise ConfigError(
                f"--label given {len(label)} times for {len(results)} results; give one per result"
            )
        if out.exists() and out.is_dir():
            raise ConfigError(f"--out {out} is a directory; give a file name like report.html")
        delta = _threshold(threshold)
        t0 = time.perf_counter()
        loaded = load_results(results)
        if diagnose:
            _diagnose_missing(loaded)
        labels = (
            list(label)
            if label
            else [r.run_id or p.stem for r, p in zip(loaded, results, strict=True)]
        )
        html_path, md_path = write_report(
            loaded, out, markdown=markdown, labels=labels, threshold=delta
        )
        if len(loaded) > 1:
            from infersight.report import render_comparison, table_console

            render_comparison(loaded, table_console(), labels=labels, threshold=delta)
        n = sum(len(r.records) for r in loaded)
        typer.echo(
            f"wrote {html_path} ({html_path.stat().st_size / 1024:.0f} KiB, {n:,} requests, "
            f"{time.perf_counter() - t0:.1f} s)"
        )
        if md_path is not None:
            typer.echo(f"wrote {md_path}")
        for r, p in zip(loaded, results, strict=True):
            if r.client_limited:
                typer.echo(
                    f"warning: {p} is a client-limited run (see the report's banner)", err=True
                )


def _threshold(text: str) -> float:
    """``5%`` or ``0.05`` -> 0.05; one clear error otherwise."""
    raw = text.strip()
    try:
        value = float(raw[:-1]) / 100.0 if raw.endswith("%") else float(raw)
    except ValueError:
        raise ConfigError(f"--threshold {text!r}: give a percentage such as 5%") from None
    if not 0.0 < value < 1.0:
        raise ConfigError(f"--threshold {text!r}: must be above 0% and below 100%")
    return value


def _fleet_report(q: FleetQuery, out: Path, *, has_files: bool) -> None:
    from infersight.entrypoints.prometheus import diagnose_prometheus, write_fleet_html

    if has_files:
        raise ConfigError("give RunResult files or --prometheus, not both")
    if out.is_dir():
        raise ConfigError(f"--out {out} is a directory; give a file name like fleet.html")
    report = diagnose_prometheus(q)
    path = write_fleet_html(report, out)
    typer.echo(
        f"wrote {path} ({path.stat().st_size / 1024:.0f} KiB, {len(report.replicas)} "
        f"replicas, {report.stats.get('seconds', 0):.1f} s)"
    )


def _diagnose_missing(results: list[RunResult]) -> None:
    """Embed verdicts in the results that hold none (the report only renders them); an
    imported file of aggregates alone gets its undecided verdicts instead."""
    undiagnosed = [r for r in results if not r.diagnosis]
    if not undiagnosed:
        return
    from infersight.diagnose import embed_diagnosis
    from infersight.importers import missing_evidence

    for r in undiagnosed:
        if embed_diagnosis(r):
            r.notes.append("diagnosed by `infersight report` (the file holds no verdicts)")
        else:
            r.diagnosis = missing_evidence(r)
