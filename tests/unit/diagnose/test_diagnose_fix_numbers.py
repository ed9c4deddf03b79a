"""The number in each fix comes from the run (docs/design.md section 5): simulated
servers with a known slot limit and compute knee, and one answer per run."""

from __future__ import annotations

import dataclasses

import pytest
from diag_fixtures import make_run

from infersight.core.records import RequestRecord, RunResult, Sample
from infersight.diagnose import diagnose_run, embed_diagnosis
from infersight.report.headline import build_headline
from infersight.stats.aggregate import aggregate
from support.sim_runs import rate_run, sweep_run


def _ids(d: object) -> list[tuple[str, str | None]]:
    return [(v.id, v.level) for v in d.verdicts]  # type: ignore[attr-defined]


def test_one_overloaded_level_names_the_slot_limit_but_gives_no_number() -> None:
    """4 slots of 0.24 s at 33 req/s, one level: the model finds the 4 slots from the
    client's records alone, but a single level checks nothing, so the fix says why it
    gives no number (the queue the open loop built, ~65, is never taken as demand)."""
    d = diagnose_run(rate_run(33.0))
    assert d.advice is not None and d.advice.model is not None
    assert d.advice.model.slots.value == 4 and d.advice.model.slots.source == "fitted"
    assert d.advice.limiter == "slots"
    slot = next(v for v in d.verdicts if v.id == "slot_bound")
    assert (slot.evidence_value("waiting") or 0) > 30  # the queue really was long
    assert slot.evidence_value("recommended_slots") is None
    rec = d.recommendation
    assert rec is not None and slot.fixes == [rec.text]  # the run's one fix
    assert rec is not None and (rec.verdict, rec.knob, rec.direction) == (
        "slot_bound",
        "slots",
        "up",
    )
    assert rec.target is None and rec.predicted == {}
    assert "fewer than two usable levels" in rec.text


def test_a_compute_knee_of_two_with_free_slots_never_raises_the_slots() -> None:
    d = diagnose_run(sweep_run(slots=8, knee=2, levels=(1, 2, 4, 8), config={"engine_slots": 8}))
    assert d.curve is not None and d.curve.knee_level == "c=2"
    assert not any(v.turns("slots", "up") for v in d.verdicts)
    assert ("compute_bound", "c=8") in _ids(d) and "slot_bound" not in [i for i, _ in _ids(d)]
    assert d.advice is not None and d.advice.limiter == "compute"
    m = d.advice.model
    # the decode step: 3/4 of 0.24 s over 7 steps, x running / 2 past the knee
    assert (
        m is not None
        and m.k.value == 2
        and m.b.value == pytest.approx(0.24 * 0.75 / 7 / 2, rel=0.05)
    )
    rec = d.recommendation
    # every level ran one replica: a fix on replicas is not checked by the run, an
    # estimate whatever the self-check of the clients says
    assert rec is not None and rec.verdict == "compute_bound" and rec.basis == "estimate"
    assert rec.fix is not None and rec.fix.error is None
    assert "not checked: every level ran on one replica" in rec.fix.rests_on
    # 8 clients, each replica unqueued near its single-sequence step: 4 replicas of 2
    assert (rec.knob, rec.direction, rec.target, rec.replicas) == ("replicas", "up", 4, 4)
    assert "more slots add latency, not throughput" in rec.text


def test_a_compute_knee_of_four_with_sixteen_slots_is_compute_bound_at_c16() -> None:
    d = diagnose_run(sweep_run(slots=16, knee=4, config={"engine_slots": 16}))
    at16 = [v for v in d.verdicts if v.level == "c=16"]
    assert [v.id for v in at16] == ["compute_bound"], [(v.id, v.summary) for v in at16]
    v = at16[0]
    assert v.evidence_value("knee") == pytest.approx(4, abs=0.1)
    assert v.evidence_value("growth_per_doubling") < 0.1
    assert v.evidence_value("tpot_p50") > 3 * v.evidence_value("tpot_at_knee")
    rec = d.recommendation
    assert rec is not None and rec.verdict == "compute_bound" and rec.limiter == "compute"
    # 16 clients, each replica at its knee of 4: 4 replicas, the slots kept
    assert (rec.knob, rec.direction, rec.target, rec.replicas) == ("replicas", "up", 4, 4)
    assert rec.fix is not None and rec.fix.error is None  # replicas: not checked
    assert rec.fix.if_saturated is not None  # its range's low end
    assert rec.predicted["throughput"] == pytest.approx(16 / 0.24, rel=0.05)
    assert rec.predicted["ttft_p50"] == pytest.approx(0.06, rel=0.05)  # as when unqueued


def test_an_admission_limit_in_a_closed_loop_raises_within_twice_the_measured_range() -> None:
    """4 slots swept to 16 clients: the model (held-out error within 15%) asks for 8,
    not the 16 clients: it never goes past 2 x the running count it measured."""
    d = diagnose_run(sweep_run(slots=4, metrics=True))
    rec = d.recommendation
    assert rec is not None and (rec.verdict, rec.knob, rec.current, rec.target) == (
        "slot_bound",
        "slots",
        4,
        8,
    )
    assert d.advice is not None and d.advice.check is not None and d.advice.check.trusted
    assert rec.predicted["throughput"] == pytest.approx(8 / 0.24, rel=0.05)
    # 16 clients on 8 slots still queue, half as long as on 4
    c16 = next(p for p in d.curve.points if p.level == "c=16")  # type: ignore[union-attr]
    assert (rec.predicted["ttft_p50"] or 0) < 0.6 * (c16.ttft_p50 or 0)


def test_random_503s_with_flat_latency_are_error_driven_not_overloaded() -> None:
    run = rate_run(8.0, errors=0.1, metrics=False)
    sus = run.aggregates["r"]["sustainability"]
    assert sus["judged"] and sus["sustainable"] is True  # every request was answered
    d = diagnose_run(run)
    assert [i for i, _ in _ids(d)] == ["error_driven"]
    assert d.recommendation is not None and d.recommendation.verdict == "error_driven"
    assert "keeps up with the load" in d.verdicts[0].fixes[0]


def test_an_overloaded_level_says_only_what_its_test_found() -> None:
    d = diagnose_run(rate_run(33.0))
    v = next(v for v in d.verdicts if v.id == "overloaded")
    assert "grew by 0.0" not in v.summary and "unsustainable" in v.summary
    slope = v.evidence_value("queue_growth")
    assert f"grew by {slope:.3g} per second" in v.summary


def _gpu_samples(run: RunResult, util: float) -> RunResult:
    t0 = min(r.scheduled for r in run.records)
    t1 = max(r.end or 0.0 for r in run.records)
    n = int((t1 - t0) / 0.25)
    run.samples += [
        Sample(t0 + i * 0.25, name, util, {"gpu": "0"})
        for i in range(n)
        for name in ("gpu.utilization", "gpu.sm_activity")
    ]
    return run


def test_one_answer_per_run_no_downsize_at_c1_while_c16_needs_capacity() -> None:
    run = _gpu_samples(sweep_run(slots=16, knee=4, config={"engine_slots": 16}), 0.2)
    d = diagnose_run(run)
    c1 = next(v for v in d.verdicts if v.level == "c=1")
    assert c1.id == "under_loaded"
    # by the fixes' typed actions: no downsize, no more slots anywhere
    assert not any(v.turns("replicas", "down") for v in d.verdicts)
    assert not any(v.turns("slots", "up") for v in d.verdicts)
    assert any(f.startswith("the run's recommendation") for f in c1.fixes)
    assert all(len(v.actions) == len(v.fixes) for v in d.verdicts)


def test_a_marginal_client_flag_is_shown_and_never_the_headline() -> None:
    """20 requests with schedule lag 5.1 ms against a 5.0 ms limit."""
    recs = []
    for i in range(20):
        r = RequestRecord(request_id=f"m{i}", scheduled=i * 0.25, labels={"level": "c=1"})
        r.sent = r.scheduled + 0.0051
        r.chunk_times = [r.sent + 0.05 + k * 0.01 for k in range(8)]
        r.chunk_tokens = [1] * 8
        r.end, r.ok, r.status, r.completion_tokens = r.chunk_times[-1], True, 200, 8
        recs.append(r)
    agg = aggregate(recs, target_rate=4.0)
    assert agg["client_limited"]["flag"] and agg["client_limited"]["marginal"]
    run = RunResult(
        records=recs,
        aggregates={"c=1": agg},
        client_limited=True,
        client_limited_reasons=agg["client_limited"]["reasons"],
        config={"levels": [{"name": "c=1", "rate": 4.0}]},
    )
    embed_diagnosis(run)
    v = next(v for v in run.diagnosis if v.id == "client_limited")
    assert v.marginal and v.title.endswith("(marginal)")
    head = build_headline(run, list(run.aggregates.items()))
    assert head.caveat is None and head.points[0].level == "c=1"
    assert head.verdict is None or head.verdict.id != "client_limited"
    assert run.recommendation is not None and run.recommendation.verdict != "client_limited"
    from infersight.stats.level_flags import client_headline

    banner = client_headline(run)  # still said at the top, as marginal
    assert banner is not None and banner[0] == "CLIENT-LIMITED (MARGINAL)"


def _two_levels(itl_low: float, itl_high: float) -> RunResult:
    low = make_run(running=1, waiting=0, concurrency=1, itl=itl_low, util=0.3, sm=0.2)
    high = make_run(running=64, waiting=0, itl=itl_high, util=0.95, sm=0.6)
    shift = 100.0
    for r in high.records:
        r.scheduled += shift
        r.sent = (r.sent or 0) + shift
        r.chunk_times = [t + shift for t in r.chunk_times]
        r.end = (r.end or 0) + shift
    high.samples = [dataclasses.replace(s, t=s.t + shift) for s in high.samples]
    low.records += high.records
    low.samples += high.samples
    low.config["levels"] += high.config["levels"]
    return low


def test_roofline_statements_are_checked_against_the_run() -> None:
    d = diagnose_run(_two_levels(0.006, 0.011))
    v = next(v for v in d.verdicts if v.id == "bandwidth_bound_decode" and v.level == "c=64")
    assert "almost no ITL cost" not in v.summary
    assert (
        "Batching is not free here: the run measured ITL p50 6 ms at 1 in flight (c=1)" in v.summary
    )
    calm = diagnose_run(_two_levels(0.0105, 0.011))
    v = next(v for v in calm.verdicts if v.id == "bandwidth_bound_decode" and v.level == "c=64")
    assert "at little ITL cost" in v.summary or "almost no ITL cost" in v.summary


def _embedded(levels: tuple[int, ...], knee: int | None) -> RunResult:
    from infersight.core.model_file import default_model_path

    eng = {
        "engine": "llama.cpp",
        "model_path": str(default_model_path()),
        "parallel": 16,
        "ctx_per_slot": 512,
        "threads": 2,
    }
    return sweep_run(slots=16, knee=knee, levels=levels, config={"engine": eng})


def test_a_cpu_ceiling_is_calibrated_at_the_measured_knee_not_from_a_matmul() -> None:
    from infersight.diagnose.physics import load_shape

    run = _embedded((1, 2, 4, 8, 16), knee=4)
    d = diagnose_run(run, store_physics=True)
    phys = run.environment["physics"]
    assert phys["device_origin"] == "calibrated" and phys["device"]["calibrated"]
    knee = next(p for p in d.curve.points if p.level == "c=4")  # type: ignore[union-attr]
    prompt = 8 * (knee.throughput or 0)  # the simulated requests have 8-token prompts
    flops = 2 * load_shape("embedded").n_active_params * ((knee.token_throughput or 0) + prompt)
    assert phys["device"]["flops"]["bf16"] == pytest.approx(flops, rel=1e-6)
    notes = [str(e.value) for e in d.verdicts[0].evidence if e.key == "note"]
    assert any("calibrated from the run" in n and "(c=4, 3.99 in flight)" in n for n in notes)
    assert next(v for v in d.verdicts if v.level == "c=16").id == "compute_bound"


def test_without_a_knee_a_cpu_shows_no_mfu() -> None:
    d = diagnose_run(_embedded((1, 2), knee=None))
    c1 = next(v for v in d.verdicts if v.level == "c=1")
    assert c1.id == "under_loaded" and "compute use unknown" in c1.summary
    assert c1.evidence_value("sm_activity") is None and c1.confidence < 0.7
    notes = [str(e.value) for e in c1.evidence if e.key == "note"]
    assert any(n.startswith("CPU compute ceiling unknown") for n in notes)


@pytest.mark.parametrize("delta", [0, -2])
def test_a_slot_bound_level_whose_limit_already_covers_the_need_still_gets_a_fix(
    monkeypatch: pytest.MonkeyPatch, delta: int
) -> None:
    """When the run's own number lands on (or, past a knee, below) the slot limit set,
    the slot-bound verdict still says what to do, in the run's one fix: keep it, or
    lower it. (A real engine sweep once produced a slot-bound verdict at c=8 on 8
    slots with no fix at all.)"""
    import infersight.diagnose.analyze as analyze

    real = analyze.model_numbers

    def landing_on_the_limit(*args: object, **kwargs: object) -> object:
        fix = real(*args, **kwargs)  # type: ignore[arg-type]
        assert fix is not None
        return dataclasses.replace(fix, slots=4 + delta, replicas=1, no_number="")

    monkeypatch.setattr(analyze, "model_numbers", landing_on_the_limit)
    d = diagnose_run(rate_run(33.0))
    slot, rec = next(v for v in d.verdicts if v.id == "slot_bound"), d.recommendation
    assert rec is not None and slot.fixes and rec.text in slot.fixes[-1], slot.summary
    expected = "--max-num-seqs 4 covers" if delta == 0 else "lower --max-num-seqs 4 \u2192 2"
    assert expected in rec.text, rec.text
