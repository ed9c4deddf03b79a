"""llm-d-benchmark's benchmark report (report.llmd): every report validates against the
format's JSON Schema (written from its documentation), one report per level, in the
format's units, with the figures of the level's own aggregate."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import orjson
import pytest

from infersight.core.records import RequestRecord
from infersight.report.llmd import llmd_reports, write_llmd
from infersight.report.view import build_view
from infersight.testing.synthetic_runs import make_run

SCHEMA = orjson.loads(
    (Path(__file__).parents[2] / "support" / "llmd_benchmark_report_v0_1.schema.json").read_bytes()
)
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)


def _lengths_match(rep: dict) -> bool:
    """The format's one rule a JSON Schema cannot state: the host's accelerators and
    types, the platform's engines and the resources' accelerators are parallel lists."""
    sc, m = rep["scenario"], rep["metrics"]
    lens = [
        len(x)
        for x in (
            sc.get("host", {}).get("accelerator"),
            sc.get("host", {}).get("type"),
            sc.get("platform", {}).get("engine"),
            m.get("resources", {}).get("accelerator"),
        )
        if x is not None
    ]
    return len(set(lens)) <= 1


def test_the_schema_itself_is_valid_and_refuses_what_the_format_refuses() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    good = llmd_reports(make_run(300, levels=(1, 4), seed=1))[0]
    VALIDATOR.validate(good)
    for broken in (
        {**good, "version": "0.2"},
        {k: v for k, v in good.items() if k != "metrics"},
        {
            **good,
            "metrics": {
                **good["metrics"],
                "latency": {
                    "time_to_first_token": {
                        **good["metrics"]["latency"]["time_to_first_token"],
                        "units": "ms/token",
                    }
                },
            },
        },
        {**good, "scenario": {**good["scenario"], "bogus": 1}},
    ):
        assert not VALIDATOR.is_valid(broken)


@pytest.mark.parametrize("gpu", [True, False])
def test_every_level_gives_one_valid_report_in_the_formats_units(gpu: bool) -> None:
    run = make_run(900, levels=(1, 4, 16), seed=3, gpu=gpu)
    reps = llmd_reports(run)
    aggs = {lv.name: lv.agg for lv in build_view(run).levels}
    assert [r["metadata"]["infersight"]["level"] for r in reps] == ["c=1", "c=4", "c=16"]
    for rep in reps:
        errors = sorted(VALIDATOR.iter_errors(rep), key=str)
        assert not errors, errors[0].message
        assert _lengths_match(rep)
        agg = aggs[rep["metadata"]["infersight"]["level"]]
        lat = rep["metrics"]["latency"]
        assert lat["time_to_first_token"]["p50"] == pytest.approx(agg["ttft"]["p50"] * 1000)
        assert lat["request_latency"]["p99"] == pytest.approx(agg["e2e"]["p99"] * 1000)
        assert lat["time_per_output_token"]["units"] == "ms/token"
        thr = rep["metrics"]["throughput"]
        assert thr["requests_per_sec"] == pytest.approx(agg["request_throughput"])
        assert thr["total_tokens_per_sec"] == pytest.approx(
            thr["input_tokens_per_sec"] + thr["output_tokens_per_sec"]
        )
        assert rep["metrics"]["requests"]["total"] == agg["requests"]["total"]
        load = rep["scenario"]["load"]
        assert load["name"] == "infersight"
        assert load["args"]["concurrency"] == agg["target"]["concurrency"]  # this point only
        assert ("host" in rep["scenario"]) is gpu
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
    assert [r["metadata"]["infersight"]["level"] for r in llmd_reports(broken)] == ["c=4"]
    paths = write_llmd(run, tmp_path / "llm-d")
    assert [p.name for p in paths] == ["benchmark_report_c_1.json", "benchmark_report_c_4.json"]
    for p in paths:
        VALIDATOR.validate(orjson.loads(p.read_bytes()))


def test_diagnose_format_llm_d_prints_every_levels_report(tmp_path: Path) -> None:
    """``infersight diagnose FILE --format llm-d``: one JSON array on stdout, every
    report valid, the diagnosis in each report's metadata."""
    from typer.testing import CliRunner

    from infersight.cli import app
    from infersight.core.records import save_run_result

    path = save_run_result(make_run(400, levels=(1, 4), seed=5), tmp_path / "run.json")
    got = CliRunner().invoke(app, ["diagnose", str(path), "--format", "llm-d"])
    assert got.exit_code == 0, got.output
    reps = orjson.loads(got.stdout)
    assert [r["metadata"]["infersight"]["level"] for r in reps] == ["c=1", "c=4"]
    for rep in reps:
        VALIDATOR.validate(rep)
        assert rep["metadata"]["infersight"]["verdicts"]  # diagnosed now, not stale
    bad = CliRunner().invoke(app, ["diagnose", str(path), "--format", "yaml"])
    assert bad.exit_code != 0 and "use infersight or llm-d" in bad.output
