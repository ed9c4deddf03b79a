"""`infersight report A B` on the terminal: each change with its call; --threshold."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from infersight.cli._app import app
from infersight.core.errors import ConfigError
from infersight.core.records import save_run_result
from infersight_testkit.synthetic_runs import make_run

runner = CliRunner()


def _files(tmp_path: Path) -> list[str]:
    before = save_run_result(
        make_run(800, levels=(1, 8), seed=7, run_id="before"), tmp_path / "a.json"
    )
    after = save_run_result(
        make_run(800, levels=(1, 8), seed=7, base_itl=0.004, run_id="after"), tmp_path / "b.json"
    )
    return [str(before), str(after)]


def test_the_console_names_each_call(tmp_path: Path) -> None:
    res = runner.invoke(
        app,
        ["report", *_files(tmp_path), "-o", str(tmp_path / "r.html"), "--threshold", "3%"],
        terminal_width=160,
    )
    assert res.exit_code == 0, res.output
    assert "after against before · level c=8" in res.output
    assert "better" in res.output and "inconclusive: run more" in res.output
    assert "within ±3% is no significant difference" in res.output
    assert "±3%" in (tmp_path / "r.html").read_text()


@pytest.mark.parametrize("value", ["0%", "100%", "-5%", "five"])
def test_a_bad_threshold_is_one_error(tmp_path: Path, value: str) -> None:
    res = runner.invoke(app, ["report", *_files(tmp_path), "--threshold", value])
    assert isinstance(res.exception, ConfigError) and "--threshold" in str(res.exception)
