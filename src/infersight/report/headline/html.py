"""The top of each run's page: the answer box and the table of contents beside it."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from infersight.report.headline.answer import Headline, build_headline
from infersight.report.verdicts.html import inline_html
from infersight.report.view import RunView

__all__ = ["headline_html", "run_headline", "toc_html"]


def run_headline(view: RunView) -> Headline:
    """The headline of a view, its levels in load order."""
    return build_headline(view.result, [(lv.name, lv.agg) for lv in view.levels], view.verdicts)


def headline_html(view: RunView) -> str:
    """The answer box: best operating point(s), find-max, main verdict, its fix."""
    rows = run_headline(view).lines(view.t0, summary=True)
    if not rows:
        rows = [("answer", "no requests or verdicts to summarise")]
    cells = "".join(
        f"<tr><th>{escape(k[:1].upper() + k[1:])}</th><td>{inline_html(v)}</td></tr>"
        for k, v in rows
    )
    return f'<div class="answer"><table>{cells}</table></div>'


def toc_html(views: Sequence[RunView], sections: Sequence[tuple[str, str]]) -> str:
    """The sticky table of contents: the comparison, each run and its sections."""
    items = []
    if len(views) > 1:
        items.append('<li><a href="#comparison">Comparison</a></li>')
    for i, v in enumerate(views):
        subs = "".join(
            f'<li><a href="#run-{i}-{slug}">{escape(t)}</a></li>' for slug, t in sections
        )
        items.append(f'<li><a href="#run-{i}"><b>{escape(v.label)}</b></a><ul>{subs}</ul></li>')
    items.append('<li><a href="#definitions">Definitions</a></li>')
    return f'<nav class="toc" aria-label="contents"><ul>{"".join(items)}</ul></nav>'
