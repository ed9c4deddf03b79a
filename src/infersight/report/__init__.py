"""infersight.report: every output of a RunResult, one writer per format.

    from infersight.report import render_console, write_outputs, write_report
    render_console(result, console)            # the bench table, cost and verdict lines
    render_comparison([before, after], console)   # report A B: is each change real?
    render_verdicts(result.diagnosis)          # one panel per verdict (diagnose)
    write_outputs(result, "runs/demo")         # result.json, schema.json, records.csv
    html = render_html([before, after])        # side-by-side comparison, first = baseline
    write_report([result], "report.html", markdown="summary.md")
    render_fleet(fleet_report, console)        # diagnose --prometheus: the fleet summary
    html = render_fleet_html(fleet_report)     # report --prometheus

Outputs render what the RunResult holds: its aggregates, cost and verdicts (the CLI
diagnoses a run before its outputs are written; this package never diagnoses). The
HTML has inline CSS and inline SVG charts only: it opens offline and makes no network
request. Plots are downsampled (quantile CDFs, binned timelines), so a run of 100,000
requests renders in seconds.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from infersight.core.records import RunResult, load_run_result
from infersight.report.compare.console import render_comparison
from infersight.report.console import headline, render_console, table_console
from infersight.report.files import write_csv, write_json, write_outputs, write_text
from infersight.report.fleet.console import render_fleet
from infersight.report.fleet.html import render_fleet_html
from infersight.report.html import render_html, render_views_html
from infersight.report.markdown import render_markdown, render_views_markdown
from infersight.report.percentile_lines import render_percentiles
from infersight.report.verdicts.console import render_diagnosis, render_verdicts
from infersight.report.view import build_views
from infersight.stats.significance import DEFAULT_DELTA

__all__ = [
    "headline",
    "load_results",
    "render_comparison",
    "render_console",
    "render_diagnosis",
    "render_fleet",
    "render_fleet_html",
    "render_html",
    "render_markdown",
    "render_percentiles",
    "render_verdicts",
    "table_console",
    "write_csv",
    "write_json",
    "write_outputs",
    "write_report",
    "write_text",
]


def load_results(paths: Sequence[str | Path]) -> list[RunResult]:
    """Load RunResult files; a missing or invalid file raises ConfigError (one line)."""
    return [load_run_result(p) for p in paths]


def write_report(
    results: RunResult | Sequence[RunResult],
    out: str | Path = "report.html",
    *,
    markdown: str | Path | None = None,
    labels: Sequence[str] | None = None,
    threshold: float = DEFAULT_DELTA,
) -> tuple[Path, Path | None]:
    """Write the HTML report (and optionally the Markdown summary); returns the paths.
    ``threshold`` is the comparison's noise δ (docs/design.md section 2)."""
    seq = [results] if isinstance(results, RunResult) else list(results)
    views = build_views(seq, labels)
    html_path = write_text(out, render_views_html(views, threshold=threshold))
    md_path = (
        write_text(markdown, render_views_markdown(views, threshold=threshold))
        if markdown
        else None
    )
    return html_path, md_path
