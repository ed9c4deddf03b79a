"""``tune`` led by the model, against the fake OpenAI server launched per trial over
loopback (docs/design.md section 8): a compute knee whose best setting is known, found
in a few trials, each predicted before it ran, and confirmed by a run of its own."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest
from rich.console import Console

from infersight.bench import BenchConfig
from infersight.core.tune_result import load_tune_result
from infersight.entrypoints.tune import run_tune
from infersight.tune import TuneConfig

pytestmark = pytest.mark.timeout(300)

KNEE, ITL, TTFT, TOKENS = 4, 0.02, 0.02, 8
# Past the knee every step slows by running / KNEE: goodput is flat from the knee until
# TPOT breaks the SLO (2.5 x ITL, at 2.5 x KNEE slots); the cheapest best is the knee.
TEMPLATE = (
    f"{sys.executable} -m infersight_testkit.fake.openai --port {{port}} "
    f"--slots {{max_num_seqs}} --compute-knee {KNEE} --ttft {TTFT} --itl {ITL} "
    f"--tokens {TOKENS} --metrics-dialect vllm"
)


def test_the_model_finds_the_knee_of_a_launched_server_and_confirms_it(tmp_path: Path) -> None:
    values = list(range(1, 17))
    cfg = TuneConfig.build(
        launch=TEMPLATE,
        slots=2,
        values=values,
        start_timeout=30.0,
        out=str(tmp_path / "t"),
        progress=False,
    )
    bench = BenchConfig.build(
        max_tokens=TOKENS,
        input_tokens="fixed:16",
        duration=3.0,
        # p50, not p99: a 3-second trial's p99 is its one or two slowest requests, which
        # a process beside the test can push past the SLO, and each such miss costs
        # the search trials that no model could have spared (fresh-clone CI, stop 51).
        slo=f"tpot_p50<{2.5 * ITL * 1000:g}ms",
        progress=False,
    )
    text = io.StringIO()
    result = run_tune(cfg, bench, console=Console(file=text, width=200))
    if result.stopped == "too noisy":  # another process disturbed the A/A pair
        pytest.skip(f"the A/A pair was too noisy here: {result.summary}")
    assert result.stopped == "done", result.summary
    search = [t for t in result.trials if t.role == "guided"]
    assert search and all(t.proposed and t.predicted is not None for t in search)
    # The knee, or just past it: per-request overheads can make the knee itself slower
    # than its neighbours by as much as the least noise floor tune allows.
    assert result.chosen is not None and KNEE <= result.chosen["slots"] <= KNEE + 2, (
        result.summary,
        [(t.setting, t.objective, t.predicted) for t in result.trials],
    )
    # The confirmation run met the objective; the answer is its, not any trial's.
    conf = result.trial(result.confirmed_by)
    assert conf is not None and conf.role == "rerun" and conf.confirmed and conf.slo_met
    assert conf.setting == result.chosen and result.slo_met is True
    assert "the SLO was met by the chosen setting's confirmation run" in result.summary
    # A third of the grid's settings, or fewer.
    assert len({t.setting["slots"] for t in result.trials}) <= len(values) // 3, [
        (t.role, t.setting, t.objective, t.predicted, t.slo_met) for t in result.trials
    ]
    # Each trial's measurement beside its prediction, in every output.
    saved = load_tune_result(tmp_path / "t" / "tune.json")
    assert saved.trials == result.trials and saved.model is not None and saved.model_curve
    assert "model" in text.getvalue() and f"confirms #{conf.confirms}" in text.getvalue()
    html = (tmp_path / "t" / "tune.html").read_text()
    assert f"confirms #{conf.confirms}" in html and ">model<" in html
