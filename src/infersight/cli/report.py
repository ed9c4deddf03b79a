"""`infersight report`: a self-contained HTML report (and Markdown summary) of runs."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from infersight.cli._conventions import command_help

if TYPE_CHECKING:
    from infersight.core.records import RunResult


_HELP = command_help(
    "Render a self-contained HTML report and Markdown summary.",
    "The page starts with the answer (the best sustainable operating point, the main "
    "verdict and its fix), then the evidence: verdicts, latency CDFs, timeline, cost. "
    "Several results are compared side by side (before/after table with deltas; the "
    "first is the baseline). The file opens offline: no scripts, fonts or images are "
    "fetched.",
    examples=[
        "infersight report runs/demo/result.json -o report.html",
        "infersight report before.json after.json -l before -l after -m summary.md",
    ],
)


def register(app: typer.Typer) -> None:
    """Add this module's commands to the app."""

    @app.command("report", help=_HELP)
    def report(
        results: list[Path] = typer.Argument(..., metavar="RESULT", help="RunResult JSON files; with several, the first is the baseline of the comparison.", show_default=False),
        out: Path = typer.Option(Path("report.html"), "--out", "-o", metavar="FILE", help="HTML file to write."),
        markdown: Path | None = typer.Option(None, "--markdown", "-m", metavar="FILE", help="Also write a Markdown summary for an issue."),
        label: list[str] | None = typer.Option(None, "--label", "-l", metavar="NAME", help="Name of each run in the comparison (repeatable).", show_default="run id or file name"),
        diagnose: bool = typer.Option(True, "--diagnose/--no-diagnose", help="Diagnose a file that holds no verdicts before rendering it."),
    ) -> None:
        import time

        from infersight.core.errors import ConfigError
        from infersight.report import load_results, write_report

        if label and len(label) != len(results):
            raise ConfigError(
                f"--label given {len(label)} times for {len(results)} results; give one per result"
            )
        if out.exists() and out.is_dir():
            raise ConfigError(f"--out {out} is a directory; give a file name like report.html")
        t0 = time.perf_counter()
        loaded = load_results(results)
        if diagnose:
            _diagnose_missing(loaded)
        labels = (
            list(label)
            if label
            else [r.run_id or p.stem for r, p in zip(loaded, results, strict=True)]
        )
        html_path, md_path = write_report(loaded, out, markdown=markdown, labels=labels)
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


def _diagnose_missing(results: list[RunResult]) -> None:
    """Embed verdicts in the results that hold none (the report only renders them)."""
    undiagnosed = [r for r in results if not r.diagnosis]
    if not undiagnosed:
        return
    from infersight.diagnose import embed_diagnosis

    for r in undiagnosed:
        if embed_diagnosis(r):
            r.notes.append("diagnosed by `infersight report` (the file holds no verdicts)")
