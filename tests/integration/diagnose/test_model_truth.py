"""The fitted model against real fake servers whose limits are known
(``infersight_testkit.truth_scenarios``), measured by a real ``bench`` over 127.0.0.1:
the limiter it names, the slots it infers, the fix it gives (never a knob that does
not bind), its self-check, and ``predict`` from the saved file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from infersight.bench import BenchConfig
from infersight.core.records import RunResult, save_run_result
from infersight.entrypoints.bench import bench_and_diagnose
from infersight_testkit import FakeOpenAI
from infersight_testkit.one_voice_truth import CASES
from infersight_testkit.truth_scenarios import scenario

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


def _run(name: str, **load: Any) -> RunResult:
    sc = scenario(name)
    assert sc.server is not None
    with FakeOpenAI.subprocess(sc.server) as srv:
        cfg = BenchConfig(
            url=srv.base_url, progress=False, diagnose=True, **{**sc.bench_load(quick=True), **load}
        )
        return bench_and_diagnose(cfg)


def test_four_slots_swept_far_past_them() -> None:
    run = _run("closed_slots", concurrency=[1, 2, 4, 16])
    m, sc, rec = run.server_model, run.self_check, run.recommendation
    assert m is not None and sc is not None and rec is not None
    assert m.slots.value == 4 and m.slots.source == "fitted"
    assert rec.limiter == "slots" and rec.fix is not None and rec.fix.knob == "slots"
    # never past twice the 4 running it measured, whatever the 16 clients
    assert rec.fix.to_value is not None and rec.fix.to_value <= 8
    assert sc.method == "leave-one-level-out" and len(sc.levels) >= 3


def test_compute_bound_with_free_slots_never_raises_them() -> None:
    run = _run("compute_free_slots", concurrency=[1, 2, 4, 16])
    rec, m = run.recommendation, run.server_model
    assert rec is not None and m is not None and rec.limiter == "compute"
    assert m.b.value and m.b.value > 0  # the step grows with the running count
    assert rec.fix is not None and rec.fix.knob != "slots"
    assert not (rec.knob == "slots" and rec.direction == "up")


def test_kv_full_is_kv_not_slots() -> None:
    run = _run("kv_bound", concurrency=[1, 2, 4, 16])
    m, rec = run.server_model, run.recommendation
    assert m is not None and rec is not None and rec.limiter == "kv"
    assert m.kv_tokens is not None and m.kv_tokens.value == pytest.approx(700, rel=0.15)
    assert m.slots.value is None  # KV binds before the 16 slots do


def test_mixed_prompt_lengths_are_prefill_not_a_slot_limit(tmp_path: Path) -> None:
    run = _run("mixed_prompts", concurrency=[1, 4, 8])
    m, rec = run.server_model, run.recommendation
    assert m is not None and rec is not None
    assert m.slots.value is None and rec.limiter == "none"
    assert "slot_bound" not in {v.id for v in run.diagnosis}
    assert m.c_first.value == pytest.approx(1e-4, rel=0.3)  # the server's 0.1 ms a token
    path = save_run_result(run, tmp_path / "run.json")
    exe = Path(sys.executable).parent / "infersight"
    out = subprocess.run(
        [str(exe), "predict", str(path), "--concurrency", "4", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    c4 = run.aggregates["c=4"]["request_throughput"]
    assert doc["prediction"]["throughput"] == pytest.approx(c4, rel=0.15)


def test_prompts_prefilled_together_are_read_as_one_step_that_binds() -> None:
    # vLLM's and llama.cpp's schedulers prefill the prompts admitted together in one
    # step: 100-token prompts at 1 ms a token take turns, 10 req/s at most, while the
    # decode step stays flat and 8 slots never fill
    run = _run("batched_prefill")
    m, sc, rec = run.server_model, run.self_check, run.recommendation
    assert m is not None and sc is not None and rec is not None
    assert m.prefill_mode == "batched"
    assert m.c_first.value == pytest.approx(1e-3, rel=0.2)  # the server's 1 ms a token
    assert m.slots.value is None
    assert sc.mape["ttft_p50"] <= 0.15 and sc.mape["throughput"] <= 0.10
    # prefill binds: no "healthy" run, no slot raise
    assert rec.limiter == "compute" and rec.fix is not None and rec.fix.knob != "slots"
    assert "prefill takes" in rec.fix.rests_on
    assert rec.text.startswith("Compute-bound by prefill") and "prefix caching" in rec.text
    verdicts = {v.level: v.id for v in run.diagnosis}
    assert verdicts["c=8"] == "compute_bound" and verdicts["c=1"] == "healthy"


def test_kv_waits_are_not_read_as_first_token_time_where_the_slots_are_stated() -> None:
    # vLLM-like: 64 sequences, KV room for 400 tokens allocated as answers grow, the
    # slots stated as a vLLM user states --max-num-seqs. Requests that waited for KV
    # room were replayed as admitted when sent, and their waits read as first-token
    # time (on real vLLM: 2.5 ms a prompt token where it takes 1.3).
    case = next(c for c in CASES if c.name == "kv_on_demand")
    with FakeOpenAI.subprocess(case.server) as srv:
        cfg = BenchConfig(
            url=srv.base_url, progress=False, diagnose=True, engine_slots=64, **case.load
        )
        run = bench_and_diagnose(cfg)
    m = run.server_model
    assert m is not None and m.kv_tokens is not None
    assert m.slots.value == 64 and m.kv_mode == "grow"
    # the server answers its first token 50 ms after admission, whatever the load (the
    # replay against the slots alone read e = 0 and a first token of 21 decode steps)
    assert m.e.value == pytest.approx(0.05, abs=0.02), m.e
    assert m.kappa.value is not None and m.kappa.value <= 2, m.kappa
