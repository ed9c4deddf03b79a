"""llm-d benchmark reports of real runs: infersight's own bench of the fake server,
written as reports and read back, gives the run's verdict and fix; GuideLLM's, AIPerf's,
inference-perf's and vLLM's benchmark's results, run for real against the same server
and converted by the format's own package (``llmd_benchmark_report``'s ``import_*``),
read as aggregates whose verdict names what is missing, with the tool's own figures
(docs/design.md section 10)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from llmd_benchmark_report import import_benchmark_report
from llmd_benchmark_report import native_to_br0_2 as convert

from infersight.bench import BenchConfig
from infersight.core.records import RunResult
from infersight.diagnose import diagnose_run
from infersight.entrypoints.bench import bench_and_diagnose
from infersight.entrypoints.diagnose import load_inputs
from infersight.importers import detect, import_file, load_result, missing_evidence
from infersight.report.llmd.writer import write_llmd
from infersight_testkit.agreement import advice
from infersight_testkit.fake.openai import FakeOpenAI
from infersight_testkit.tool_runs import (
    run_aiperf,
    run_inference_perf,
    run_vllm_bench,
    word_tokenizer,
)
from support.tool_server import LEVELS, REQUESTS, SERVER

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI.subprocess(SERVER) as srv:
        yield srv


@pytest.fixture(scope="module")
def ours(server: FakeOpenAI) -> RunResult:
    return bench_and_diagnose(
        BenchConfig(
            url=server.base_url,
            concurrency=LEVELS,
            requests=REQUESTS,
            max_tokens=16,
            input_tokens="fixed:16",
            progress=False,
            diagnose=True,
        )
    )


def _converted(reports: list[Any], folder: Path) -> list[RunResult]:
    """Each converted report as the package writes it (YAML), read back by infersight."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for i, rep in enumerate(reports):
        path = folder / f"benchmark_report_{i}.yaml"
        rep.export_yaml(str(path))
        assert import_benchmark_report(str(path)).dump() == rep.dump()
        assert detect(path.read_bytes()) == "llmd"
        out.append(load_result(path))
    return out


def _undecided_names_what_is_missing(run: RunResult) -> None:
    assert not run.records and not diagnose_run(run).verdicts
    (verdict,) = missing_evidence(run)
    assert verdict.id == "undecided"
    assert "per-request timings" in str(verdict.evidence[0].value)


def test_our_reports_of_a_real_run_give_its_verdict_and_fix(
    ours: RunResult, tmp_path: Path
) -> None:
    paths = write_llmd(ours, tmp_path / "llm-d")
    old = write_llmd(ours, tmp_path / "llm-d-0.1", version="0.1")
    for p in [*paths, *old]:
        import_benchmark_report(str(p))  # every file loads with the package
    ((_, back),) = load_inputs(paths)
    assert [lv["name"] for lv in back.config["levels"]] == ["c=1", "c=4", "c=8"]
    assert len(back.records) == len(ours.records)
    before, after = diagnose_run(ours), diagnose_run(back)
    mine, theirs = advice(before), advice(after)
    # The same verdict and fix; the fix's words may differ in the model's held-out
    # error (a point or so: the report keeps no chunk gaps, lags or queue delays).
    assert dataclasses.replace(mine, text="") == dataclasses.replace(theirs, text=""), (
        mine.text,
        theirs.text,
    )
    assert sorted((v.id, v.level) for v in before.verdicts) == sorted(
        (v.id, v.level) for v in after.verdicts
    )
    assert mine.verdict == "slot_bound" and mine.model_slots == 4


@pytest.mark.needs("guidellm")
def test_guidellm_converted_by_the_package(
    guidellm_measured: tuple[Path, RunResult], tmp_path: Path
) -> None:
    native, _ = guidellm_measured  # GuideLLM's run of SERVER, shared (conftest.py)
    runs = _converted(convert.import_guidellm_all(str(native)), tmp_path / "br")
    assert [r.config["levels"][0]["name"] for r in runs] == ["c=1", "c=4", "c=8"]
    theirs = import_file(native)  # per request: a full verdict
    assert diagnose_run(theirs).recommendation is not None
    for run in runs:
        _undecided_names_what_is_missing(run)
        name = run.config["levels"][0]["name"]
        got, want = run.aggregates[name], theirs.aggregates[name]
        assert got["ttft"]["p50"] == pytest.approx(want["ttft_from_sent"]["p50"], rel=0.05)
        assert got["request_throughput"] == pytest.approx(want["request_throughput"], rel=0.25)


@pytest.mark.needs("aiperf")
def test_aiperf_converted_by_the_package(server: FakeOpenAI, tmp_path: Path) -> None:
    folder = run_aiperf(server.base_url, tmp_path / "artifacts", concurrency=4, requests=REQUESTS)
    summary = next(folder.rglob("profile_export_aiperf.json"))
    (run,) = _converted([convert.import_aiperf(str(summary))], tmp_path / "br")
    # The package's converter reads the concurrency from input_config.loadgen, which
    # AIPerf 0.13 does not write (its phases hold it): the report names no load point.
    assert run.config["levels"][0]["name"] == "stage 0"
    _undecided_names_what_is_missing(run)
    native = import_file(summary)  # AIPerf's own summary: aggregates too
    _undecided_names_what_is_missing(native)
    (got,), want = run.aggregates.values(), native.aggregates["c=4"]
    assert got["ttft"]["p50"] == pytest.approx(want["ttft_from_sent"]["p50"], rel=1e-6)
    assert got["e2e"]["p99"] == pytest.approx(want["e2e_from_sent"]["p99"], rel=1e-6)


@pytest.mark.needs("inference-perf")
def test_inference_perf_converted_by_the_package(server: FakeOpenAI, tmp_path: Path) -> None:
    stages = [(REQUESTS, c) for c in LEVELS]
    folder = run_inference_perf(server.base_url, tmp_path / "reports", stages=stages, tokens=16)
    files = sorted(folder.rglob("stage_*_lifecycle_metrics.json"))
    assert len(files) == len(LEVELS)
    runs = _converted([convert.import_inference_perf(str(f)) for f in files], tmp_path / "br")
    assert [r.config["levels"][0]["name"] for r in runs] == ["c=1", "c=4", "c=8"]
    for f, run in zip(files, runs, strict=True):
        _undecided_names_what_is_missing(run)
        native = import_file(f)  # the stage's own summary
        _undecided_names_what_is_missing(native)
        (want,) = native.aggregates.values()
        (got,) = run.aggregates.values()
        assert got["ttft"]["p50"] == pytest.approx(want["ttft_from_sent"]["p50"], rel=1e-6)


@pytest.mark.needs("vllm")
def test_vllm_bench_converted_by_the_package(server: FakeOpenAI, tmp_path: Path) -> None:
    native = run_vllm_bench(
        server.base_url,
        tmp_path / "vllm.json",
        model="fake",
        tokenizer=word_tokenizer(tmp_path / "vllm-tok"),
        prompts=REQUESTS,
        input_len=16,
        output_len=16,
        max_concurrency=4,
    )
    (run,) = _converted([convert.import_vllm_benchmark(str(native))], tmp_path / "br")
    assert run.config["levels"][0]["name"] == "c=4"
    _undecided_names_what_is_missing(run)
    theirs = import_file(native)  # --save-detailed: every request, a full verdict
    assert len(theirs.records) == REQUESTS and diagnose_run(theirs).verdicts
    got, want = run.aggregates["c=4"], theirs.aggregates["c=4"]
    assert got["ttft"]["p50"] == pytest.approx(want["ttft_from_sent"]["p50"], rel=1e-6)
    assert got["e2e"]["p50"] == pytest.approx(want["e2e_from_sent"]["p50"], rel=1e-6)
