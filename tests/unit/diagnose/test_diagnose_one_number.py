"""One number everywhere: plan and diagnose recommend the same slots; a stored run's
peaks and floors are reused by every reader; verdicts quote the aggregates tables."""

from __future__ import annotations

from pathlib import Path

import pytest
from diag_fixtures import LLAMA3_8B, make_run, one

from infersight.core.model_file import default_model_path
from infersight.core.records import RunResult, Sample, load_run_result, save_run_result
from infersight.diagnose import diagnose, diagnose_run
from infersight.diagnose.physics import (
    Device,
    decode_floor,
    find_gpu,
    load_shape,
    plan_capacity,
    shape_from_hf_config,
)
from infersight.diagnose.physics.hardware import GIB
from infersight.diagnose.physics.slots import recommend_slots
from infersight.report import render_markdown

#: A fixed small CPU (not this host's): 2 cores, 12 GB/s, 50 GFLOP/s per core; decode of
#: the embedded model turns compute-bound near 6 sequences on it.
CPU = Device(
    key="cpu",
    name="test CPU (2 cores)",
    memory_bytes=16 * GIB,
    bandwidth=12e9,
    flops={"bf16": 1e11, "fp16": 1e11, "fp32": 1e11},
    source="fixed for the test",
    kind="cpu",
    cores=2,
    measured=True,
)


def embedded_run(slots: int = 8, clients: int = 16, ctx_per_slot: int = 2048) -> RunResult:
    """The demo's shape: the embedded engine with ``slots`` slots under ``clients``."""
    run = make_run(
        running=slots,
        waiting=clients - slots,
        concurrency=clients,
        prompt=64,
        output=48,
        itl=0.05,
        ttft=0.3,
        util=0.5,
        sm=None,
    )
    lab = {"engine": "llamacpp", "source": "http://127.0.0.1:1/metrics"}
    run.samples = [s for s in run.samples if not s.name.startswith(("engine.", "gpu."))]
    for i in range(31):
        run.samples += [
            Sample(1000.0 + i, "engine.requests_running", float(slots), lab),
            Sample(1000.0 + i, "engine.requests_waiting", float(clients - slots), lab),
            Sample(1000.0 + i, "engine.slots", float(slots), lab),
        ]
    run.environment = {}
    run.config = {
        "levels": [{"name": f"c={clients}", "concurrency": clients}],
        "engine": {
            "engine": "llama.cpp",
            "model_path": str(default_model_path()),
            "parallel": slots,
            "ctx_per_slot": ctx_per_slot,
            "threads": 2,
        },
    }
    return run


def test_one_level_gives_no_number_while_plan_still_sizes_from_physics() -> None:
    """One level checks no model: diagnose names the knob and says why it gives no
    number; `plan` still sizes the slots from physics (the roofline's compute knee)."""
    shape = load_shape("embedded")
    d = diagnose_run(embedded_run(), gpu=CPU)
    v = one(d.verdicts, "slot_bound")
    assert v.evidence_value("recommended slots") is None
    assert "raise infersight serve --parallel above 8" in v.fixes[0]
    rec = d.recommendation
    assert rec is not None and (rec.knob, rec.direction, rec.target) == ("slots", "up", None)
    assert "fewer than two usable levels" in rec.text
    adv = recommend_slots(shape, CPU, ctx=2048)
    assert adv.limited_by == "compute knee" and adv.target == 12
    for concurrency in (16, None):  # `plan --concurrency 16` and plain `plan`
        plan = plan_capacity(shape, CPU, ctx=2048, concurrency=concurrency)
        assert plan.recommended_slots == adv.target
        assert plan.settings["infersight serve"][0] == f"--parallel {adv.target}"


def test_memory_is_the_last_cap_on_the_models_number() -> None:
    """The model asks for what the load needs; memory (what `plan` says fits) caps it."""
    from infersight.core.server_model import Fix, Param, Prediction, SelfCheck, ServerModel
    from infersight.diagnose.model_numbers import PhysicsBounds, model_numbers

    shape, h100 = shape_from_hf_config(LLAMA3_8B), find_gpu("h100")
    assert h100 is not None
    m = ServerModel(slots=Param(value=32), measured={"n": 64.0})
    check = SelfCheck(method="leave-one-level-out", mape={"throughput": 0.05}, trusted=True)
    fix = Fix(
        knob="slots", from_value=32, to_value=60, predicted=Prediction(throughput=50.0), error=0.05
    )
    roomy = plan_capacity(shape, h100, ctx=1256).max_sequences
    n = model_numbers(
        m, check, fix, closed_loop=True, physics=PhysicsBounds(memory=roomy, memory_why="plan")
    )
    assert n is not None and n.slots == 60 and n.bound == "model"
    small = Device(
        key="gpu",
        name="small GPU",
        memory_bytes=20 * GIB,
        bandwidth=1e12,
        flops={"bf16": 1e14},
        source="fixed for the test",
    )
    fits = plan_capacity(shape, small, ctx=1256).max_sequences
    assert 0 < fits < 60
    n = model_numbers(m, check, fix, closed_loop=True, physics=PhysicsBounds(memory=fits))
    assert n is not None and n.slots == fits and n.bound == "memory"
    assert any("memory holds" in r for r in n.rests_on)
    # an untrusted model gives no number past what it measured, memory or not
    n = model_numbers(m, SelfCheck(method="none", why_not="one level"), fix, closed_loop=True)
    assert n is not None and n.slots == 60  # 60 is within the 64 running it measured
    far = Fix(knob="slots", from_value=32, to_value=100, error=None)
    n = model_numbers(m, SelfCheck(method="none", why_not="one level"), far, closed_loop=True)
    assert n is not None and n.slots is None and n.no_number == "one level"


def test_stored_peaks_and_floors_are_reused(tmp_path: Path) -> None:
    run = embedded_run()
    first = diagnose(run, gpu=CPU, store_physics=True)
    phys = run.environment["physics"]
    assert Device.from_dict(phys["device"]) == CPU and set(phys["floors"]) == {"c=16"}
    itl_floor = one(first, "slot_bound").evidence_value("ITL floor")
    assert phys["floors"]["c=16"]["itl_floor_s"] == itl_floor
    # the physics of this fixed CPU, not of the machine running the test
    batch = round(phys["floors"]["c=16"]["batch"])
    expect = decode_floor(
        load_shape("embedded"), CPU, batch=batch, context=phys["floors"]["c=16"]["context_tokens"]
    ).itl_s
    assert itl_floor == pytest.approx(expect)
    loaded = load_run_result(save_run_result(run, tmp_path / "run.json"))
    again = one(diagnose(loaded), "slot_bound")  # no --gpu: a reader on any machine
    assert again.evidence_value("ITL floor") == itl_floor
    assert again.evidence_value("recommended slots") == one(first, "slot_bound").evidence_value(
        "recommended slots"
    )
    src = next(e.source for e in again.evidence if e.name == "ITL floor")
    assert src.endswith("(stored in the run)")
    notes = [str(e.value) for e in again.evidence if e.name == "note"]
    assert any(n.startswith("device peaks as stored in the run") for n in notes)
    assert not any("measured now" in n for n in notes)


def test_without_stored_peaks_a_reader_measures_and_says_so() -> None:
    v = one(diagnose(embedded_run()), "slot_bound")
    notes = [str(e.value) for e in v.evidence if e.name == "note"]
    assert any(
        n.startswith("CPU peaks measured now on the machine reading this run") for n in notes
    )


def test_verdicts_quote_the_aggregates_numbers() -> None:
    run = make_run(
        running=4, concurrency=4, prompt=8000, output=4, ttft=0.8, itl=0.02, util=0.97, sm=0.9
    )
    level = next(iter({r.labels["level"] for r in run.records}))
    # the aggregates tables' numbers (their own request set and window)
    run.aggregates[level] = {
        "window": {"start": 1000.0, "end": 1030.0, "method": "auto (closed loop)"},
        "ttft_from_sent": {"count": 37, "p50": 0.777},
        "e2e_from_sent": {"count": 37, "p50": 0.84},
        "itl": {"count": 111, "p50": 0.0201},
    }
    v = one(diagnose(run), "compute_bound_prefill")
    assert v.evidence_value("TTFT p50 (from actual send)") == 0.777
    src = next(e.source for e in v.evidence if e.name == "TTFT p50 (from actual send)")
    assert src == (
        f"bench aggregates[{level}].ttft_from_sent.p50 (from actual send; 37 "
        "samples, window auto (closed loop))"
    )
    assert v.evidence_value("ITL p50") == 0.0201
    assert v.evidence_value("TTFT share of e2e") == pytest.approx(0.777 / 0.84)
    run.diagnosis = diagnose(run)
    md = render_markdown(run)
    assert (
        "| level | ITL p50 (pooled) | ITL floor | ITL / floor | TTFT p50 (from actual send) |" in md
    )
    row = next(ln for ln in md.splitlines() if ln.startswith(f"| {level} | 20.1 ms | "))
    assert "| 777 ms |" in row  # the floors table quotes the aggregates, not its own set
