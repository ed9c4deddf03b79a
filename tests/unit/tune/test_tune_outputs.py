"""What tune shows: the console table, the TuneResult file and the HTML page."""

from __future__ import annotations

import io
import re
from collections.abc import Mapping
from pathlib import Path

from rich.console import Console
from test_tune_session import Server, opts
from tune_synth import server_run

from infersight.core.records import RunResult
from infersight.core.tune_result import TuneResult, load_tune_result, save_tune_result
from infersight.report.tune_html import render_tune_html
from infersight.tune import TrialRun, TuneSession, render_tune
from infersight.tune.objective import score


def _result() -> tuple[TuneResult, dict[str, RunResult]]:
    runs: dict[str, RunResult] = {}

    class Keep(Server):
        def __call__(self, setting: Mapping[str, int], name: str, role: str) -> TrialRun:
            run = super().__call__(setting, name, role)
            if run.path is not None and run.result is not None:
                runs[run.path] = run.result
            return run

    return TuneSession(opts(values=[1, 2, 4, 6, 8]), Keep()).run(), runs


def test_console_json_and_html_say_the_same(tmp_path: Path) -> None:
    result, runs = _result()
    out = io.StringIO()
    render_tune(result, Console(file=out, width=200))
    text = out.getvalue()
    assert text.startswith("Answer: slots 2 -> slots 6")
    assert "Noise floor:" in text and "before (baseline, 2 runs)" in text
    assert "no significant difference" in text and "better" in text
    path = save_tune_result(result, tmp_path / "tune.json")
    again = load_tune_result(path)
    assert again == result
    html = render_tune_html(again, runs)
    assert set(re.findall(r"https?://[^\"' <]+", html)) == {"http://www.w3.org/2000/svg"}
    assert html.count('<details id="trial-') == len(result.trials)
    assert "(chosen)" in html and "Before and after" in html and "against slots" in html


def test_the_objective_is_the_best_level_with_an_interval() -> None:
    run = server_run(4)
    s = score(run, {})
    assert s.level == "c=4" and s.value is not None and s.low is not None and s.high is not None
    assert s.low < s.value < s.high and s.slo_met is None
    met = score(server_run(4, slo={"tpot_p99": 0.1}), {"tpot_p99": 0.1})
    assert met.slo_met is True and met.margin is not None and met.margin < 1
    missed = score(server_run(4, slo={"tpot_p99": 0.001}), {"tpot_p99": 0.001})
    assert missed.slo_met is False and missed.margin is not None and missed.margin > 1
