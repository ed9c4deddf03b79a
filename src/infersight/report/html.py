"""The self-contained HTML page: one or several runs, plus the comparison.

The page has inline CSS, inline SVG charts and no script, font, image or stylesheet
reference, so it opens offline and makes no network request.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from infersight import __version__
from infersight.core.records import RunResult
from infersight.report.compare.html import comparison_html
from infersight.report.headline.html import toc_html
from infersight.report.sections import SECTIONS, run_section
from infersight.report.view import RunView, build_views
from infersight.stats.significance import DEFAULT_DELTA

__all__ = ["html_page", "render_html", "render_views_html"]

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;
color:#1d2330;margin:0;background:#f6f7f9}
.layout{display:grid;grid-template-columns:210px minmax(0,1fr);gap:0 12px;max-width:1400px;
margin:0 auto}main{max-width:1120px;padding:8px 16px 48px;min-width:0}
nav.toc{position:sticky;top:0;align-self:start;max-height:100vh;overflow-y:auto;
padding:20px 0 20px 12px;font-size:13px;box-sizing:border-box}nav.toc ul{list-style:none;margin:0;
padding:0}nav.toc ul ul{padding-left:12px;margin-bottom:8px}nav.toc a{color:#1d4f91;
text-decoration:none;display:block;padding:1px 0}nav.toc a:hover{text-decoration:underline}
@media (max-width:1000px){.layout{display:block}nav.toc{position:static;max-height:none}}
.answer{background:#fff;border:2px solid #0072B2;border-radius:6px;padding:4px 10px}
.answer table{border:0;margin:0;background:none;font-size:14px}.answer th,.answer td{border:0;
padding:4px 8px}.answer th{background:none;white-space:nowrap;color:#0072B2}
h1{font-size:24px;margin:28px 0 6px}h2{font-size:19px;margin:26px 0 8px;\
border-bottom:1px solid #dde1e7;
padding-bottom:4px}h3{font-size:15px;margin:14px 0 6px}
table{border-collapse:collapse;margin:6px 0 12px;background:#fff;font-size:13px}
th,td{border:1px solid #dde1e7;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#eef1f5;font-weight:600}td.num{text-align:right;font-variant-numeric:tabular-nums;
white-space:nowrap}td.msg{max-width:520px;word-break:break-word;font-family:monospace;font-size:12px}
table.kv td:first-child{font-weight:600;white-space:nowrap}table.kv td{word-break:break-word}
.muted{color:#667085}.tag{font:12px monospace;background:#eef1f5;border-radius:4px;padding:1px 5px}
.banner{padding:10px 14px;border-radius:6px;margin:10px 0;font-size:15px}
.banner.bad{background:#fde8e6;border:2px solid #c0392b}.banner.warn{background:#fff4d6;
border:2px solid #d68910}
.verdict{background:#fff;border-left:5px solid #0072B2;padding:8px 14px;margin:10px 0;
border-radius:4px}.verdict.bad{border-left-color:#c0392b}.verdict.ok{border-left-color:#009E73}
.verdict h3{margin:4px 0}.verdict table.ev{margin:4px 0}
.facts{display:flex;flex-wrap:wrap;gap:10px 28px;background:#fff;padding:10px 14px;\
border-radius:6px}
.charts{display:flex;flex-wrap:wrap;gap:12px}.charts svg{background:#fff;border:1px solid #dde1e7;
border-radius:4px}
svg .pt{font-size:13px;font-weight:600;fill:#1d2330}svg .tk{font-size:10px;fill:#4a5160}
svg .al{font-size:11px;fill:#4a5160}svg .lg{font-size:11px;fill:#1d2330}svg .bl{font-size:10px;
fill:#667085}svg .grid{stroke:#e6e9ee;stroke-width:1}
td.better{background:#dff3e8;color:#146c43}td.worse{background:#fde8e6;color:#a12a1e}
td.same{color:#667085}td.unsure{background:#fff4d6;color:#8a5a00}\
pre{background:#fff;padding:10px;overflow:auto;font-size:12px}
h2.inline{display:inline-block;border:0;margin:18px 0 6px}summary{cursor:pointer}\
.wide{overflow-x:auto;max-width:100%}dl.defs dt{font-weight:600;margin-top:6px}\
dl.defs dd{margin-left:18px}
code{font:12px monospace;background:#eef1f5;border-radius:3px;padding:0 3px}
table.ev{width:100%;table-layout:fixed}table.ev col.c-name{width:28%}table.ev col.c-val{width:20%}
table.ev col.c-src{width:52%}table.ev td{overflow-wrap:anywhere}table.ev td.num{white-space:normal}
tr.ev-note td{background:#fafbfc}tr.ev-note .ev-name{font-weight:600}
svg.plot{max-width:100%;height:auto}.wide>table{margin-right:2px}
"""

DEFINITIONS = (
    (
        "TTFT",
        "first content chunk − intended send time (the load strategy's schedule), so "
        "client-side queueing is included and coordinated omission is avoided. The variant "
        "from the actual send is shown beside it.",
    ),
    ("e2e latency", "last byte or [DONE] − intended send time."),
    (
        "ITL (pooled)",
        "every gap between content chunks, pooled over requests; a chunk that "
        "carries k tokens counts its gap with weight k.",
    ),
    (
        "ITL (per request)",
        "(last chunk − first chunk) / (chunks − 1), averaged per request (GuideLLM's definition).",
    ),
    (
        "TPOT",
        "(last chunk − first chunk) / (output tokens − 1), for requests with at least "
        "2 output tokens (vLLM's definition).",
    ),
    (
        "schedule lag",
        "actual send − intended send: the load generator's own delay. A p99 "
        "above 5 ms flags the run as client-limited.",
    ),
    (
        "throughput",
        "completed requests, and output tokens of requests completed, in the "
        "steady-state window divided by its length (the window method is listed per level).",
    ),
    ("success rate", "successes / (successes + errors); a truncated stream is never a success."),
    ("percentiles", "exact, from all samples, each with its sample count."),
    (
        "in flight / queued",
        "timeline: in flight = intended send..end of each request; queued = "
        "intended send..actual send plus the gateway's X-Queue-Delay; both averaged over each bin. "
        "Dashed engine lines are the server's own running/waiting counts.",
    ),
    (
        "utilisation",
        "GPU utilisation counts time with any kernel running, not how much of the "
        "GPU it used; SM activity, where shown, is the better measure. GPU and host CPU are % "
        "of the whole device or of all cores (left axis); a process's CPU is % of one core "
        "(above 100% on several cores) and has its own axis on the right.",
    ),
    ("$ per day", "the level's spend rate in its window, projected over 24 h."),
)


def html_page(title: str, body: str, toc: str = "") -> str:
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        # An empty data: icon stops browsers from fetching /favicon.ico.
        '<link rel="icon" href="data:,">'
        f'<title>{escape(title)}</title><style>{CSS}</style></head><body><div class="layout">'
        f"{toc}<main>{body}"
        f'<p class="muted">Generated by infersight {escape(__version__)}.</p></main></div>'
        "</body></html>\n"
    )


def _definitions() -> str:
    items = "".join(f"<dt>{escape(k)}</dt><dd>{escape(v)}</dd>" for k, v in DEFINITIONS)
    return f'<h2 id="definitions">Definitions</h2><dl class="defs">{items}</dl>'


def render_views_html(views: Sequence[RunView], *, threshold: float = DEFAULT_DELTA) -> str:
    """The page for already built views (``threshold``: the comparison's noise δ)."""
    if not views:
        return html_page("infersight report", "<h1>infersight report</h1><p>No results.</p>")
    title = "infersight report: " + (
        views[0].label if len(views) == 1 else " vs ".join(v.label for v in views)
    )
    parts = [f"<h1>{escape(title)}</h1>"]
    if len(views) > 1:
        parts.append(comparison_html(views, threshold=threshold))
    # One run: the page's title is its heading; several: each run is headed by its label.
    parts.extend(run_section(v, i, heading=len(views) > 1) for i, v in enumerate(views))
    parts.append(_definitions())
    return html_page(title, "".join(parts), toc_html(views, SECTIONS))


def render_html(
    results: RunResult | Sequence[RunResult],
    labels: Sequence[str] | None = None,
    *,
    threshold: float = DEFAULT_DELTA,
) -> str:
    """One self-contained HTML report for one or several RunResults (first = baseline)."""
    seq = [results] if isinstance(results, RunResult) else list(results)
    return render_views_html(build_views(seq, labels), threshold=threshold)
