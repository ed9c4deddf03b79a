"""The tune page (docs/design.md section 8): the answer, the objective against the knob,
every trial with its interval and call, the before/after, and each trial's own curve
and verdicts (from its RunResult, with the report's renderers)."""

from __future__ import annotations

from collections.abc import Mapping
from html import escape

from infersight.core.records import RunResult
from infersight.core.tune_result import TrialRecord, TuneResult
from infersight.report.compare.rows import CALL_CLASS
from infersight.report.html import html_page
from infersight.report.levels import fmt_cell
from infersight.report.plots import throughput_latency_charts
from infersight.report.sections import verdicts_html
from infersight.report.svg.charts import chart, fmt_value
from infersight.report.svg.series import PALETTE, Series
from infersight.report.view import build_view
from infersight.stats.significance import BETTER, SAME, WORSE, MetricCall

__all__ = ["render_tune_html"]


def _setting(setting: Mapping[str, int], knob: str | None) -> str:
    if knob is not None and knob in setting:
        return f"{knob} {setting[knob]}"
    return ", ".join(f"{k} {v}" for k, v in sorted(setting.items()))


def _call_cell(c: MetricCall | None) -> str:
    if c is None:
        return "<td>-</td>"
    cls = CALL_CLASS.get(c.call, "unsure")
    return (
        f'<td class="{cls}">{escape(c.call)}<br><small>B/A {escape(c.interval_text())}</small></td>'
    )


def _answer(t: TuneResult) -> str:
    rows = [("Answer", t.summary)]
    if t.guide.get("reason"):
        rows.append(("Knob", f"{t.knob}, {t.direction}: {t.guide['reason']}"))
    what = "goodput under the SLO" if t.slo else "best sustainable throughput"
    slo = ", ".join(f"{k} < {fmt_value(v, 's')}" for k, v in t.slo.items())
    rows.append(("Objective", what + (f" ({slo})" if slo else "")))
    if t.noise_floor is not None:
        rows.append(
            (
                "Noise floor",
                f"{t.noise_floor:.1%}, from {t.noise_basis}: a setting "
                "counts as better only beyond it",
            )
        )
    rows.append(
        (
            "Search",
            f"{t.search}: {len(t.trials)} trials in {t.wall_s / 60:.1f} min"
            + (f" of a {t.budget_s / 60:.0f} min budget" if t.budget_s else "")
            + ("" if t.stopped == "done" else f", stopped: {t.stopped}"),
        )
    )
    body = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in rows)
    return f'<div class="answer" id="answer"><table>{body}</table></div>'


def _curve(t: TuneResult) -> str:
    if t.knob is None:
        return ""
    pts = sorted(
        (
            (float(tr.setting[t.knob]), tr)
            for tr in t.trials
            if tr.status == "ok" and tr.objective is not None and t.knob in tr.setting
        ),
        key=lambda p: (p[0], p[1].index),
    )
    if not pts:
        return ""
    series = [
        Series(
            "objective",
            [p[0] for p in pts],
            [p[1].objective or 0.0 for p in pts],
            PALETTE[0],
            kind="points",
            point_labels=[f"#{p[1].index}" for p in pts],
        )
    ]
    for i, (name, attr) in enumerate((("95% low", "low"), ("95% high", "high")), start=1):
        have = [(x, getattr(tr, attr)) for x, tr in pts if getattr(tr, attr) is not None]
        if have:
            series.append(
                Series(
                    name,
                    [h[0] for h in have],
                    [h[1] for h in have],
                    PALETTE[i],
                    kind="points",
                    dash=True,
                )
            )
    model = [(float(p.value), p.objective) for p in t.model_curve if p.objective is not None]
    if model:
        series.append(Series("model", [m[0] for m in model], [m[1] for m in model], PALETTE[3]))
    xs = [p[0] for p in pts]
    ylabel = "goodput (req/s)" if t.objective == "goodput" else "throughput (req/s)"
    return chart(
        series,
        title=f"{ylabel} against {t.knob}",
        xlabel=t.knob,
        ylabel=ylabel,
        xlog=max(xs) >= 8 * max(min(xs), 1.0),
    )


def _trials(t: TuneResult) -> str:
    head = (
        "#",
        "role",
        "setting",
        "status",
        t.objective + " (req/s)",
        "95% interval",
        "model",
        "vs baseline",
        "TTFT p99",
        "TPOT p99",
        "SLO",
        "diagnosis",
        "RunResult",
    )
    rows = []
    for tr in t.trials:
        chosen = " <b>(chosen)</b>" if tr.index == t.chosen_trial else ""
        status = escape(tr.status if tr.status != "failed" else f"failed: {tr.error}")
        detail = f"<br><small>{escape(tr.error_message)}</small>" if tr.error_message else ""
        ci = (
            f"{fmt_cell(tr.low)} – {fmt_cell(tr.high)}"
            if tr.low is not None and tr.high is not None
            else "-"
        )
        slo = "-" if tr.slo_met is None else ("met" if tr.slo_met else "missed")
        link = f'<a href="{escape(tr.result)}">{escape(tr.result)}</a>' if tr.result else "-"
        rows.append(
            f"<tr><td class=num>{tr.index}</td><td>{escape(tr.role_text())}</td>"
            f"<td>{escape(_setting(tr.setting, t.knob))}{chosen}</td><td>{status}{detail}</td>"
            f"<td class=num>{fmt_cell(tr.objective)}</td><td class=num>{ci}</td>"
            f"<td class=num>{escape(tr.predicted_text())}</td>{_call_cell(tr.vs_baseline)}"
            f"<td class=num>{fmt_cell(tr.ttft_p99, 's')}</td>"
            f"<td class=num>{fmt_cell(tr.tpot_p99, 's')}</td><td>{slo}</td>"
            f"<td>{escape(tr.advice or tr.verdict or '-')}</td><td>{link}</td></tr>"
        )
    header = "".join(f"<th>{escape(h)}</th>" for h in head)
    return f'<div class="wide"><table><tr>{header}</tr>{"".join(rows)}</table></div>'


def _before_after(t: TuneResult) -> str:
    if not t.before_after:
        return "<p class=muted>No before/after: the baseline stays, or the run stopped first.</p>"
    rows = []
    for c in t.before_after:
        unit = "" if c.better == "higher" else "s"
        rows.append(
            f"<tr><td>{escape(c.label)}</td><td class=num>{fmt_cell(c.a, unit)}</td>"
            f"<td class=num>{fmt_cell(c.b, unit)}</td>{_call_cell(c)}"
            f"<td class=muted>{escape(c.note)}</td></tr>"
        )
    return (
        "<table><tr><th>metric</th><th>before (baseline, 2 runs)</th><th>after (the "
        "choice, run again)</th><th>call</th><th>note</th></tr>" + "".join(rows) + "</table>"
    )


def _toc(t: TuneResult, runs: Mapping[str, RunResult]) -> str:
    subs = "".join(
        f'<li><a href="#trial-{tr.index}">Trial {tr.index}</a></li>'
        for tr in t.trials
        if tr.result is not None and tr.result in runs
    )
    items = (
        '<li><a href="#answer">Answer</a></li><li><a href="#trials">Trials</a></li>'
        '<li><a href="#before-after">Before and after</a></li>'
        f'<li><a href="#runs">Each trial</a><ul>{subs}</ul></li>'
    )
    return f'<nav class="toc" aria-label="contents"><ul>{items}</ul></nav>'


def _trial_details(tr: TrialRecord, run: RunResult, knob: str | None) -> str:
    view = build_view(run, f"trial {tr.index}")
    charts = "".join(throughput_latency_charts(view))
    return (
        f'<details id="trial-{tr.index}"><summary>Trial {tr.index} ({escape(tr.role)}): '
        f"{escape(_setting(tr.setting, knob))}</summary>{verdicts_html(view)}"
        f'<div class="charts">{charts}</div></details>'
    )


def render_tune_html(result: TuneResult, runs: Mapping[str, RunResult]) -> str:
    """The whole page; ``runs`` maps a trial's RunResult path to the run."""
    title = f"infersight tune: {result.target.get('kind', '')} · {result.knob or 'baseline'}"
    legend = (
        f"<p class=muted>Calls ({escape(BETTER)}, {escape(WORSE)}, {escape(SAME)}, "
        "inconclusive) compare each trial's best level with the baseline's two runs, "
        "10 time slices each, 95% intervals. Model: the objective the model of the "
        "server, fitted on the trials before it, predicted for the trial; the curve is "
        "the model fitted on every trial.</p>"
    )
    details = "".join(
        _trial_details(tr, runs[tr.result], result.knob)
        for tr in result.trials
        if tr.result is not None and tr.result in runs
    )
    body = (
        f"<h1>{escape(title)}</h1>{_answer(result)}"
        f'<h2 id="trials">Trials</h2>{legend}<div class="charts">{_curve(result)}</div>'
        f'{_trials(result)}<h2 id="before-after">Before and after</h2>{_before_after(result)}'
        + ("".join(f"<p class=muted>note: {escape(n)}</p>" for n in result.notes))
        + f'<h2 id="runs">Each trial</h2>{details or "<p class=muted>No trial ran.</p>"}'
    )
    return html_page(title, body, _toc(result, runs))
