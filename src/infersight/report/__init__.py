"""infersight.report: a self-contained HTML report and a Markdown summary of RunResults.

    from infersight.report import render_html, render_markdown, write_report
    html = render_html(result)                 # one run
    html = render_html([before, after])        # side-by-side comparison, first = baseline
    write_report([result], "report.html", markdown="summary.md")

The HTML has inline CSS and inline SVG charts only: it opens offline and makes no
network request. Plots are downsampled (quantile CDFs, binned timelines), so a run of
100,000 requests renders in seconds.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from infersight.core.records import RunResult, load_run_result
from infersight.report.html import render_html, render_views_html
from infersight.report.markdown import render_markdown, render_views_markdown
from infersight.report.view import build_views

__all__ = ["load_results", "render_html", "render_markdown", "write_report"]


def load_results(paths: Sequence[str | Path]) -> list[RunResult]:
    """Load RunResult files; a missing or invalid file raises ConfigError (one line)."""
    return [load_run_result(p) for p in paths]


def _write(path: Path, text: str) -> Path:
    # Temp file + rename: an interrupted write never leaves a half report behind.
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    return path


def write_report(
    results: RunResult | Sequence[RunResult],
    out: str | Path = "report.html",
    *,
    markdown: str | Path | None = None,
    labels: Sequence[str] | None = None,
) -> tuple[Path, Path | None]:
    """Write the HTML report (and optionally the Markdown summary); returns the paths."""
    seq = [results] if isinstance(results, RunResult) else list(results)
    views = build_views(seq, labels)
    html_path = _write(Path(out), render_views_html(views))
    md_path = _write(Path(markdown), render_views_markdown(views)) if markdown else None
    return html_path, md_path
