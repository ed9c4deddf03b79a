"""``tune --format llm-d``: each trial's folder gets its levels' benchmark reports, of
the version asked for, with the trial's setting among the engine's flags."""

from __future__ import annotations

from pathlib import Path

import pytest
from llmd_benchmark_report import import_benchmark_report

from infersight.entrypoints.tune_trial import Trials
from infersight_testkit.synthetic_runs import make_run


@pytest.mark.parametrize("version", ["0.2.1", "0.1"])
def test_a_trial_writes_its_reports_with_its_setting(version: str, tmp_path: Path) -> None:
    trials = Trials(None, None, "launch", tmp_path, llmd=version)  # type: ignore[arg-type]
    trial = tmp_path / "trials" / "parallel-4"
    trials.save(make_run(300, levels=(1, 4), seed=8), {"parallel": 4}, trial, 1.0, None)
    files = sorted((trial / "llm-d").glob("*.json"))
    assert [f.name for f in files] == ["benchmark_report_c_1.json", "benchmark_report_c_4.json"]
    for f in files:
        rep = import_benchmark_report(str(f)).dump()
        assert rep["version"] == version
        if version == "0.1":
            args = rep["scenario"]["platform"]["engine"][0]["args"]
        else:
            args = rep["scenario"]["stack"][0]["native"]["args"]
        assert args["--parallel"] == 4
