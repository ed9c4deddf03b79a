"""The run's one fix and its capacity curve in every output: the console headline, the
HTML report (a chart of throughput and TPOT against the work in flight, the knee
marked) and the Markdown summary all say the same thing."""

from __future__ import annotations

import re
from html import escape

from rich.console import Console

from infersight.diagnose import embed_diagnosis
from infersight.report import render_console, render_diagnosis, render_html, render_markdown
from support.sim_runs import sweep_run


def _run() -> object:
    run = sweep_run(slots=16, knee=4, config={"engine_slots": 16})
    embed_diagnosis(run)
    assert run.recommendation is not None and run.capacity_curve is not None
    return run


def test_every_output_shows_the_one_fix_with_its_prediction() -> None:
    run = _run()
    rec = run.recommendation  # type: ignore[attr-defined]
    con = Console(record=True, width=400)
    render_console(run, con)  # type: ignore[arg-type]
    text = con.export_text()
    assert f"fix: {rec.text}" in text
    assert re.search(
        r"expected after the fix: throughput about 6\d\.\d req/s, TTFT p50 about 6\d(\.\d)? ms",
        text,
    )
    assert re.search(r"self-check: leave-one-level-out MAPE throughput \d%", text)
    assert text.index("fix:") < text.index("infersight bench")  # the answer before the table
    md = render_markdown(run)  # type: ignore[arg-type]
    assert (
        f"- **Fix**: {rec.text}" in md and "- **Expected after the fix**: throughput about 6" in md
    )
    assert "- **Self-check**: leave-one-level-out MAPE" in md
    assert "**Capacity curve**" in md and re.search(r"\| c=4 \| 3\.99 \|.*\| knee, best \|", md)
    html = render_html(run)  # type: ignore[arg-type]
    assert escape(rec.text) in html and "Expected after the fix" in html
    assert "Self-check" in html and "leave-one-level-out MAPE" in html
    # the model's own section: its parameters and the held-out error per level
    model = html[html.index('id="run-0-model"') : html.index('id="run-0-throughput"')]
    assert "Self-check (leave-one-level-out)" in model and "trusted within 15%" in model
    assert model.count("<tr><td>c=") == 5 and "<th>MAPE</th>" in model
    assert "stated at bench time (--engine-slots)" in model


def test_the_html_draws_the_curve_with_the_knee_marked() -> None:
    html = render_html(_run())  # type: ignore[arg-type]
    section = html[html.index('id="run-0-capacity"') : html.index('id="run-0-throughput"')]
    assert "Capacity curve: throughput and TPOT against work in flight" in section
    assert "c=4 (knee)" in section and "measured knee (c=4)" in section
    assert section.count("<circle") >= 2 * 5 + 1  # throughput and TPOT per level, the knee
    assert "measured knee: 3.99 in flight (c=4)" in section


def test_diagnose_prints_the_level_table_above_the_fix_and_the_verdicts() -> None:
    run = _run()
    con = Console(record=True, width=240)
    render_diagnosis(run, run.diagnosis, console=con, title="run.json")  # type: ignore[arg-type,attr-defined]
    out = con.export_text()
    assert (
        out.index("capacity curve")
        < out.index("c=16")
        < out.index("fix:")
        < out.index("Compute-bound · level")
    )
    # a fix on replicas: every level ran one, so the run never checked it
    assert "rests on: the fitted model (not checked: every level ran on one replica)" in out
    assert out.index("fix:") < out.index("self-check:") < out.index("Compute-bound · level")


def test_the_best_point_is_the_measured_knee_even_on_a_client_flagged_level() -> None:
    """The demo on a busy box: c=4 (the knee) is flagged for schedule lag, c=16 is not;
    the answer names the knee, as the fix does, not the unsteady top level."""
    from infersight.core.curve import CapacityCurve
    from infersight.core.records import RunResult
    from infersight.report.headline.answer import build_headline

    def agg(tok: float, ttft99: float, steady: bool, flag: bool) -> dict[str, object]:
        return {
            "requests": {"ok": 32},
            "output_token_throughput": tok,
            "request_throughput": tok / 46,
            "ttft": {"p99": ttft99},
            "window": {"steady": steady},
            "sustainability": {"judged": False},
            "client_limited": {"flag": flag, "marginal": False},
        }

    levels = [
        ("c=1", agg(19.4, 1.7, True, True)),
        ("c=4", agg(30.9, 3.8, True, True)),
        ("c=16", agg(28.9, 24.3, False, False)),
    ]
    run = RunResult(capacity_curve=CapacityCurve(knee=4, knee_level="c=4", knee_reached=True))
    assert build_headline(run, levels, []).points[0].level == "c=4"
    assert build_headline(RunResult(), levels, []).points[0].level == "c=16"  # no knee stored
