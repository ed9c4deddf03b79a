"""One short ``tune`` on the real embedded engine (docs/design.md section 8): each trial
starts llama.cpp with its own --parallel, runs bench, is diagnosed and saved."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from infersight.bench import BenchConfig
from infersight.core.records import load_run_result
from infersight.core.tune_result import load_tune_result
from infersight.entrypoints.tune import run_tune
from infersight.tune import TuneConfig

pytestmark = [pytest.mark.engine, pytest.mark.timeout(240)]


def test_a_short_tune_of_the_embedded_engine(tmp_path: Path) -> None:
    out = tmp_path / "tune"
    cfg = TuneConfig.build(
        slots=2,
        ctx=512,
        knob="slots",
        search="grid",
        values=[1, 2, 4],
        out=str(out),
        progress=False,
    )
    bench = BenchConfig.build(max_tokens=8, input_tokens="fixed:16", duration=2.0, progress=False)
    text = io.StringIO()
    result = run_tune(cfg, bench, console=Console(file=text, width=160))
    assert result.target["kind"] == "embedded"
    assert result.baseline == {"slots": 2, "ctx": 512, "threads": result.baseline["threads"]}
    roles = [t.role for t in result.trials]
    assert roles[:2] == ["baseline", "a/a"] and set(roles[2:4]) == {"grid"}
    assert {t.setting["slots"] for t in result.trials} == {1, 2, 4}
    assert all(t.status == "ok" for t in result.trials), [t.error_message for t in result.trials]
    assert result.knob == "slots" and result.values == [1, 2, 4]
    assert result.noise_basis.startswith("the A/A pair")
    if result.stopped == "done":
        assert result.noise_floor is not None and result.chosen is not None
        assert result.chosen["slots"] in (1, 2, 4)
    else:  # another process disturbed the A/A pair: every value measured, none advised
        assert result.stopped == "too noisy" and result.chosen is None
    for t in result.trials:
        run = load_run_result(out / str(t.result))
        assert run.config["tune_setting"] == t.setting
        assert run.config["engine"]["parallel"] == t.setting["slots"]  # its own engine
        assert t.objective is not None and t.objective > 0
    assert load_tune_result(out / "tune.json").summary == result.summary
    assert "Answer:" in text.getvalue() and (out / "tune.html").is_file()
