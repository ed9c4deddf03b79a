"""Each verdict from RunResult fixtures with vLLM metric names and GPU readings."""

from __future__ import annotations

import pytest
from diag_fixtures import LLAMA3_8B, ids, make_run, one

from infersight.core.records import RunResult, Sample
from infersight.diagnose import VERDICT_IDS, Verdict, diagnose
from infersight.diagnose.physics import (
    decode_floor,
    find_gpu,
    recommend_slots,
    shape_from_hf_config,
)


def test_kv_bound() -> None:
    vs = diagnose(
        make_run(running=180, waiting=40, kv=0.97, preempt_per_s=2.0, util=0.98, sm=0.8, itl=0.03)
    )
    v = one(vs, "kv_bound")
    assert "slot_bound" not in ids(vs) and "capacity" not in ids(vs)
    assert v.evidence_value("KV cache usage") == pytest.approx(0.97, abs=0.02)
    assert v.evidence_value("preemption rate") == pytest.approx(2.0, rel=0.05)
    assert v.evidence_value("waiting (Q)") == pytest.approx(40, rel=0.05)
    # one fix, the run's: more KV room with vLLM's own settings and the model's number,
    # the preemptions in the KV story (never the generic "cap --max-model-len")
    assert len(v.fixes) == 1 and "raise the KV cache" in v.fixes[0]
    assert "--gpu-memory-utilization" in v.fixes[0] and "preemptions/s" in v.fixes[0]
    assert not any("--max-model-len" in f for f in v.fixes)
    assert v.engine == "vllm" and v.confidence >= 0.8


def test_kv_bound_from_preemptions_alone() -> None:
    vs = diagnose(make_run(running=120, waiting=10, kv=0.6, preempt_per_s=0.5, util=0.95))
    assert one(vs, "kv_bound").evidence_value("preemption rate") > 0


def test_slot_bound_from_one_level_names_the_limit_and_gives_no_number() -> None:
    vs = diagnose(make_run(running=32, waiting=50, slots=32, kv=0.3, util=0.9, sm=0.6))
    v = one(vs, "slot_bound")
    assert "slot-bound" not in v.summary  # the sentence says what, the title says which
    assert v.evidence_value("slots (S)") == 32
    assert v.evidence_value("running (R)") == pytest.approx(32, rel=0.05)
    # one level: nothing to check the model on, so no number beyond what it measured
    assert v.evidence_value("recommended slots") is None
    assert "the fitted model sizes the fix (the run's recommendation)" in v.summary
    assert (
        "raise --max-num-seqs above 32 (no number beyond the measured range: fewer "
        "than two usable levels" in v.fixes[0]
    )


def test_capacity_the_records_do_not_show_is_said_once() -> None:
    """Engine gauges with 20 waiting that the client's records do not show: the model
    finds nothing binding, and the rules' "capacity" is one line naming both."""
    vs = diagnose(make_run(running=100, waiting=20, kv=0.5, util=0.99, sm=0.85, itl=0.03))
    assert "capacity" not in ids(vs)
    lines = [str(e.value) for v in vs for e in v.evidence if e.key == "disagrees"]
    assert len(lines) == 1
    assert "Queueing: capacity" in lines[0]
    assert "The model says the limiter is not known from one level" in lines[0]


def test_bandwidth_bound_decode_states_floor_ratio() -> None:
    run = make_run(running=64, waiting=0, util=0.95, sm=0.6, itl=0.011, prompt=1000, output=256)
    v = one(diagnose(run), "bandwidth_bound_decode")
    shape, h100 = shape_from_hf_config(LLAMA3_8B), find_gpu("h100")
    assert h100 is not None
    floor = decode_floor(shape, h100, batch=64, context=1000 + 128)
    assert v.evidence_value("bandwidth floor") == pytest.approx(floor.bandwidth_s, rel=0.03)
    assert v.evidence_value("ITL / floor") == pytest.approx(0.011 / floor.itl_s, rel=0.05)
    assert v.evidence_value("ITL / floor") < 2


def test_compute_bound_prefill() -> None:
    run = make_run(
        running=4, concurrency=4, prompt=8000, output=4, ttft=0.8, itl=0.02, util=0.97, sm=0.9
    )
    v = one(diagnose(run), "compute_bound_prefill")
    assert v.evidence_value("prompt tokens (mean)") == 8000
    assert v.evidence_value("TTFT share of e2e") > 0.9
    assert any("--enable-prefix-caching" in f for f in v.fixes)


def test_host_starved() -> None:
    vs = diagnose(make_run(running=80, util=0.55, sm=0.35, engine_cpu=99, itl=0.05))
    v = one(vs, "host_starved")
    assert v.evidence_value("engine process CPU") == 99
    assert v.evidence_value("ITL / floor") > 1.5
    assert "under_loaded" not in ids(vs)


def test_busy_illusion() -> None:
    v = one(diagnose(make_run(running=80, util=0.99, sm=0.25, itl=0.03)), "busy_illusion")
    assert v.evidence_value("utilisation (U)") == pytest.approx(0.99, abs=0.01)
    assert v.evidence_value("SM activity") == pytest.approx(0.25, abs=0.02)
    assert any("--max-num-seqs" in f for f in v.fixes)


def test_under_loaded() -> None:
    v = one(diagnose(make_run(running=4, concurrency=4, util=0.2, sm=0.1)), "under_loaded")
    assert v.evidence_value("running (R)") == pytest.approx(4, rel=0.05)
    assert v.evidence_value("slots (S)") == 256


def test_error_driven_names_kind_and_source() -> None:
    v = one(
        diagnose(make_run(running=16, error_kind="RateLimited", error_every=10)), "error_driven"
    )
    assert v.evidence_value("error rate") == pytest.approx(0.1, abs=0.02)
    assert v.evidence_value("errors: RateLimited") > 0
    assert v.evidence_value("from: vllm-a") == v.evidence_value("failed requests")
    assert any("Retry-After" in f for f in v.fixes)


def test_one_healthy_level_names_no_limiter() -> None:
    vs = diagnose(make_run(running=100, util=0.9, sm=0.7, itl=0.04))
    assert ids(vs) == ["healthy"]
    # one level: nothing waits, but one load cannot tell "nothing binds" from compute,
    # so no line names a limiter
    assert vs[0].title == "Limiter not known from one level"
    assert "nothing binds" in vs[0].summary and "one load cannot show" in vs[0].summary
    assert not any(e.key == "disagrees" for e in vs[0].evidence)


def test_missing_engine_metrics_infers_and_lowers_confidence() -> None:
    run = make_run(running=32, concurrency=32, engine_metrics=False, queue_delay=0.5)
    run.samples = [s for s in run.samples if not s.name.startswith("gpu.")]
    vs = diagnose(run)
    for v in vs:
        said = [v.summary, *(str(e.value) for e in v.evidence if e.key == "disagrees")]
        assert any("inferred" in t for t in said)
        assert v.confidence <= 0.7
    q = vs[0].evidence_value("waiting (Q)")
    # Little's law: Q = arrival rate x queue delay, about 32 x 0.5 / (0.5 + e2e)
    assert q is not None and 3 < q < 12


def test_window_seconds_splits_and_merges() -> None:
    run = make_run(running=100, util=0.9, sm=0.7, itl=0.04, duration=30)
    vs = diagnose(run, window_seconds=5)
    assert ids(vs) == ["healthy"]  # six healthy windows merged into one
    assert vs[0].window.end - vs[0].window.start > 25


def test_phases_detected_per_window() -> None:
    a = make_run(running=4, concurrency=4, util=0.2, sm=0.1, duration=20)
    b = make_run(
        running=180,
        waiting=40,
        kv=0.97,
        preempt_per_s=2.0,
        util=0.98,
        sm=0.8,
        itl=0.03,
        duration=20,
    )
    shift = 25.0
    for r in b.records:
        r.scheduled += shift
        r.sent = (r.sent or 0) + shift
        r.end = (r.end or 0) + shift
        r.chunk_times = [t + shift for t in r.chunk_times]
        r.labels["level"] = "burst"
    b.samples = [Sample(s.t + shift, s.name, s.value, s.labels) for s in b.samples]
    a.records += b.records
    a.samples += b.samples
    a.config["levels"] = [{"name": "c=4"}, {"name": "burst"}]
    vs = diagnose(a)
    assert [(v.level, v.id) for v in vs] == [("c=4", "under_loaded"), ("burst", "kv_bound")]


def test_client_limited_flag_from_aggregates() -> None:
    run = make_run(running=16)
    run.aggregates = {
        "c=16": {"client_limited": {"flag": True, "reasons": ["schedule lag p99 12.0 ms > 5 ms"]}}
    }
    v = one(diagnose(run), "client_limited")
    assert v.evidence_value("reason") == "schedule lag p99 12.0 ms > 5 ms"


def test_client_limited_without_the_flag_is_judged_from_the_records() -> None:
    # A file without the bench's flag: the fixed 5 ms limit, shown apart from the lag.
    run = make_run(running=16)
    run.aggregates = {}
    for r in run.records:
        r.sent = r.scheduled + 0.00504
    v = one(diagnose(run), "client_limited")
    assert v.evidence_value("reason") == "schedule lag p99 5.04 ms > 5.00 ms"


def test_samples_only_monitor_recording() -> None:
    run = make_run(running=32, waiting=50, slots=32, util=0.9)
    monitor = RunResult(
        kind="monitor", config={"engine": {"url": "", "engine": "vllm"}}, samples=run.samples
    )
    vs = diagnose(monitor, gpu="h100")
    assert "slot_bound" in ids(vs)


def test_verdicts_serialise_per_contract() -> None:
    vs = diagnose(make_run(running=32, waiting=50, slots=32))
    d = vs[0].model_dump()
    assert set(d) >= {"id", "title", "summary", "window", "evidence", "confidence", "fixes"}
    assert set(d["window"]) == {"start", "end"}
    assert set(d["evidence"][0]) == {"key", "name", "value", "unit", "source"}
    assert all(v.id in VERDICT_IDS for v in vs)
    assert Verdict.model_validate(d) == vs[0]


def test_engine_specific_fix_names() -> None:
    for engine, flag in (("sglang", "--max-running-requests"), ("tgi", "--max-batch-size")):
        run = make_run(running=32, waiting=50, slots=32)
        run.samples = [
            Sample(s.t, s.name, s.value, {**s.labels, "engine": engine})
            if s.name.startswith("engine.")
            else s
            for s in run.samples
        ]
        v = one(diagnose(run), "slot_bound")
        assert v.engine == engine and flag in v.fixes[0]


def test_no_data() -> None:
    assert diagnose(RunResult()) == []


def _with_oom(run: RunResult, every: int, message: str) -> RunResult:
    for i, r in enumerate(run.records):
        if i % every == 0:
            r.ok, r.error, r.status, r.error_message = False, "OutOfMemory", 500, message
            r.chunk_times, r.chunk_tokens = [], []
    return run


def test_memory_pressure_names_the_capacity_plans_fix() -> None:
    # One OOM in 50 is under the error-driven threshold's radar for other rules, but an
    # engine that ran out of memory is a finding on its own.
    run = _with_oom(
        make_run(running=200, slots=256, kv=0.95, util=0.9),
        50,
        "HTTP 400: CUDA out of memory. Tried to allocate 2.00 GiB",
    )
    vs = diagnose(run, gpu="h100")
    v = one(vs, "memory_pressure")
    assert (
        ids(vs).index("memory_pressure") < ids(vs).index("error_driven")
        if "error_driven" in ids(vs)
        else True
    )
    assert v.evidence_value("out-of-memory errors") == sum(
        1 for r in run.records if r.error == "OutOfMemory"
    )
    shape, h100 = shape_from_hf_config(LLAMA3_8B), find_gpu("h100")
    assert h100 is not None
    target = v.evidence_value("recommended slots")
    # The capacity plan's number for this model, device and sequence length.
    assert target == recommend_slots(shape, h100, ctx=1256).target
    assert any(f"--max-num-seqs {target}" in f and "capacity plan" in f for f in v.fixes)
    assert any("--kv-cache-dtype fp8" in f for f in v.fixes)
    assert "CUDA out of memory" in str(v.evidence_value("example OutOfMemory"))


def test_no_memory_pressure_without_oom() -> None:
    vs = diagnose(make_run(running=16, error_kind="Overloaded", error_every=10))
    assert "memory_pressure" not in ids(vs)


def test_under_loaded_without_device_readings() -> None:
    """vLLM's CPU build (or a remote server): no GPU readings, so nothing says how busy
    its device was. One client on 16 slots is still under-loaded, at lower confidence,
    saying so; with a GPU reading the same level is judged on it (busy: not idle)."""
    run = make_run(running=1, concurrency=1, slots=16, util=0.2, sm=None)
    run.samples = [s for s in run.samples if not s.name.startswith("gpu.")]
    run.environment = {"gpus": []}
    v = one(diagnose(run), "under_loaded")
    assert "the run read no device use" in v.summary and v.confidence < 0.7
    busy = diagnose(make_run(running=1, concurrency=1, slots=16, util=0.9, sm=None))
    assert "under_loaded" not in ids(busy)
