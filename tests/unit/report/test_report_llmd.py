"""llm-d-benchmark's benchmark report (report.llmd): every report, 0.2.1 and 0.1, is
loaded back by the format's own package (``llmd_benchmark_report``); one report per
level, in the format's units, with the figures of the level's own aggregate."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from llmd_benchmark_report import (
    BenchmarkReportV01,
    BenchmarkReportV02,
    import_benchmark_report,
    load_benchmark_report,
)
from pydantic import ValidationError

from infersight.core.records import RequestRecord
from infersight.report.llmd.writer import llmd_reports, write_llmd
from infersight.report.view import build_view
from infersight_testkit.synthetic_runs import make_run


def _loaded(doc: dict[str, Any]) -> Any:
    """The report as the package reads it from JSON text (a file's round trip)."""
    return load_benchmark_report(orjson.loads(orjson.dumps(doc)))


def test_the_package_refuses_what_the_format_refuses() -> None:
    good = llmd_reports(make_run(300, levels=(1, 4), seed=1))[0].dump()
    assert isinstance(_loaded(good), BenchmarkReportV02)
    lat = good["results"]["request_performance"]["aggregate"]["latency"]
    for broken in (
        {k: v for k, v in good.items() if k != "run"},
        {**good, "scenario": {**good["scenario"], "bogus": 1}},
        {**good, "version": "0.3"},
    ):
        with pytest.raises((ValidationError, ValueError)):
            _loaded(broken)
    lat["time_to_first_token"]["units"] = "s/token"
    with pytest.raises(ValidationError):
        _loaded(good)


@pytest.mark.parametrize("gpu", [True, False])
def test_every_level_gives_one_report_the_package_loads_in_its_units(gpu: bool) -> None:
    run = make_run(900, levels=(1, 4, 16), seed=3, gpu=gpu)
    reps = [r.dump() for r in llmd_reports(run)]
    aggs = {lv.name: lv.agg for lv in build_view(run).levels}
    assert [r["results"]["observability"]["infersight"]["level"] for r in reps] == [
        "c=1",
        "c=4",
        "c=16",
    ]
    assert len({r["run"]["uid"] for r in reps}) == 3  # one report each
    assert len({r["run"]["eid"] for r in reps}) == 1  # one run
    for rep in reps:
        back = _loaded(rep)
        assert isinstance(back, BenchmarkReportV02) and back.version == "0.2.1"
        level = rep["results"]["observability"]["infersight"]["level"]
        agg = aggs[level]
        perf = rep["results"]["request_performance"]
        lat = perf["aggregate"]["latency"]
        assert lat["time_to_first_token"]["units"] == "s"
        assert lat["time_to_first_token"]["p50"] == pytest.approx(agg["ttft"]["p50"])
        assert lat["request_latency"]["p99"] == pytest.approx(agg["e2e"]["p99"])
        assert lat["time_per_output_token"]["units"] == "s/token"
        thr = perf["aggregate"]["throughput"]
        assert thr["request_rate"]["mean"] == pytest.approx(agg["request_throughput"])
        assert thr["total_token_rate"]["mean"] == pytest.approx(
            thr["input_token_rate"]["mean"] + thr["output_token_rate"]["mean"]
        )
        assert perf["aggregate"]["requests"]["total"] == agg["requests"]["total"]
        load = rep["scenario"]["load"]["standardized"]
        assert load["tool"] == "infersight"
        assert load["concurrency"] == agg["target"]["concurrency"]  # this point only
        # Every request of the level is one point of each series, at its intended send.
        n = sum(1 for r in run.records if r.labels.get("level") == level)
        for series in ("time_to_first_token", "request_latency", "time_per_output_token"):
            assert len(perf["time_series"]["latency"][series]["series"]) == n
        engine = rep["results"]["observability"]["components"][0]
        assert engine["time_series"]["num_requests_running"]["series"]  # the engine's R
        accel = rep["scenario"]["stack"][0]["standardized"]["accelerator"]
        assert (accel["count"] > 0) is gpu


def test_version_0_1_is_valid_under_the_packages_0_1_model() -> None:
    run = make_run(600, levels=(1, 4), seed=4, gpu=True)
    aggs = {lv.name: lv.agg for lv in build_view(run).levels}
    reps = [r.dump() for r in llmd_reports(run, "0.1")]
    assert len(reps) == 2
    for rep in reps:
        back = _loaded(rep)
        assert isinstance(back, BenchmarkReportV01) and rep["version"] == "0.1"
        agg = aggs[rep["metadata"]["infersight"]["level"]]
        assert rep["metrics"]["latency"]["time_to_first_token"]["p50"] == pytest.approx(
            agg["ttft"]["p50"] * 1000
        )
        assert rep["scenario"]["load"]["metadata"]["tool"] == "infersight"
        assert rep["scenario"]["load"]["args"]["concurrency"] == agg["target"]["concurrency"]
        assert "batch_size" in rep["metrics"]["service"]  # the engine's running count


def test_a_level_without_an_answer_has_no_report_and_files_are_written(tmp_path: Path) -> None:
    run = make_run(300, levels=(1, 4), seed=2)
    assert len(llmd_reports(run)) == 2
    # Every request of c=1 failed: no TTFT, so no report for it.
    failed = [
        r
        if r.labels.get("level") != "c=1"
        else RequestRecord(
            **{
                **r.to_dict(),
                "ok": False,
                "chunk_times": [],
                "chunk_tokens": [],
                "error": "Overloaded",
                "status": 503,
            }
        )
        for r in run.records
    ]
    broken = run.model_copy(update={"records": failed, "aggregates": {}})
    assert len(llmd_reports(broken)) == 1
    for version in ("0.2.1", "0.1"):
        paths = write_llmd(run, tmp_path / version, version=version)
        assert [p.name for p in paths] == ["benchmark_report_c_1.json", "benchmark_report_c_4.json"]
        for p in paths:
            assert import_benchmark_report(str(p)).dump()["version"] == version


def test_diagnose_format_llm_d_prints_every_levels_report(tmp_path: Path) -> None:
    """``infersight diagnose FILE --format llm-d``: one JSON array on stdout, every
    report loaded by the package, the diagnosis in each report."""
    from typer.testing import CliRunner

    from infersight.cli import app
    from infersight.core.records import save_run_result

    path = save_run_result(make_run(400, levels=(1, 4), seed=5), tmp_path / "run.json")
    got = CliRunner().invoke(app, ["diagnose", str(path), "--format", "llm-d"])
    assert got.exit_code == 0, got.output
    reps = orjson.loads(got.stdout)
    assert [r["results"]["observability"]["infersight"]["level"] for r in reps] == ["c=1", "c=4"]
    for rep in reps:
        _loaded(rep)
        assert rep["results"]["observability"]["infersight"]["verdicts"]  # diagnosed now
    old = CliRunner().invoke(app, ["diagnose", str(path), "--format", "llm-d:0.1"])
    assert old.exit_code == 0, old.output
    assert [_loaded(r).version for r in orjson.loads(old.stdout)] == ["0.1", "0.1"]
    bad = CliRunner().invoke(app, ["diagnose", str(path), "--format", "yaml"])
    assert bad.exit_code != 0 and "use infersight, llm-d or llm-d:0.1" in bad.output
