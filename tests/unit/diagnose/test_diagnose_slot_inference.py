"""The slot limit when the engine exports none (vLLM), --engine-slots, and an engine
without KV usage (docs/design.md section 5)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import orjson
import pytest
from diag_fixtures import ids, make_run, one
from typer.testing import CliRunner

from infersight.bench import BenchConfig
from infersight.cli._app import app
from infersight.core.errors import ConfigError
from infersight.core.records import RunResult, Sample, save_run_result
from infersight.diagnose import diagnose

runner = CliRunner()


def engine_run(
    *,
    running: float | Sequence[float],
    waiting: float,
    kv: float | None,
    engine: str = "vllm",
    slots: float | None = None,
    preempt_per_s: float = 0.0,
    clients: int | None = None,
) -> RunResult:
    """Records of a closed loop plus one engine scrape a second, shaped like ``engine``'s
    /metrics after normalisation: vLLM exports running, waiting and KV usage but no slot
    limit; llama.cpp exports running, deferred and /props slots but no KV usage."""
    r0 = running if isinstance(running, int | float) else max(running)
    run = make_run(
        running=r0, waiting=waiting, concurrency=clients or round(r0 + waiting), util=0.5, sm=0.3
    )
    t_base, n = 1000.0, 31
    rs = [float(running)] * n if isinstance(running, int | float) else list(running)
    lab = {"engine": engine, "source": "http://10.0.0.5:8000/metrics"}
    samples = [s for s in run.samples if not s.name.startswith("engine.")]
    for i in range(n):
        t = t_base + i
        samples += [
            Sample(t, "engine.requests_running", rs[i % len(rs)], lab),
            Sample(t, "engine.requests_waiting", float(waiting), lab),
        ]
        if kv is not None:
            samples.append(Sample(t, "engine.kv_cache_usage", kv, lab))
        if slots is not None:
            samples.append(Sample(t, "engine.slots", slots, lab))
        if engine == "vllm":
            samples.append(Sample(t, "engine.preemptions_total", preempt_per_s * i, lab))
    run.samples = samples
    run.config["engine"] = {"url": "http://10.0.0.5:8000", "engine": engine}
    return run


def test_vllm_flat_running_with_a_queue_the_records_do_not_show_is_said_once() -> None:
    """The engine's gauges read a slot plateau (R flat at 4, 84 waiting) that the
    client's records do not show (every request answered at once): the model, fitted to
    the records, decides; the rules' reading is one line that names both."""
    vs = diagnose(engine_run(running=4, waiting=84, kv=0.004))
    assert ids(vs) == ["healthy"]
    lines = [str(e.value) for e in vs[0].evidence if e.key == "disagrees"]
    assert len(lines) == 1
    assert "R stays at 4 with 84 waiting: the slot limit is 4" in lines[0]
    assert "The model says the limiter is not known from one level" in lines[0]
    assert not vs[0].fixes  # no second fix from the dropped reading


def test_vllm_kv_full_is_kv_bound_not_slot_bound() -> None:
    vs = diagnose(engine_run(running=180, waiting=40, kv=0.97, preempt_per_s=2.0))
    v = one(vs, "kv_bound")
    assert "slot_bound" not in ids(vs)
    assert v.evidence_value("KV cache usage") == pytest.approx(0.97)
    assert v.evidence_value("slot limit (inferred)") is None  # a full KV cache explains R


def test_running_that_is_not_flat_is_not_taken_for_a_slot_limit() -> None:
    vs = diagnose(engine_run(running=[2, 5, 8, 11, 14, 17], waiting=20, kv=0.1))
    assert "slot_bound" not in ids(vs)
    assert all(v.evidence_value("slot limit (inferred)") is None for v in vs)


def test_llamacpp_without_kv_usage_is_never_kv_bound() -> None:
    run = engine_run(running=4, waiting=20, kv=None, engine="llamacpp", slots=4)
    vs = diagnose(run)
    assert "kv_bound" not in ids(vs)
    v = one(vs, "slot_bound")
    assert v.evidence_value("KV cache usage") == "unknown"
    assert "KV usage unknown" in v.summary
    assert "raise --parallel above 4" in v.fixes[0]
    # even with preemptions, an engine without KV usage is not called KV-bound
    run.samples += [
        Sample(
            1000.0 + i, "engine.preemptions_total", 3.0 * i, {"engine": "llamacpp", "source": "x"}
        )
        for i in range(31)
    ]
    assert "kv_bound" not in ids(diagnose(run))


def test_engine_slots_overrides_the_inferred_limit() -> None:
    run = engine_run(running=4, waiting=84, kv=0.004)
    vs = diagnose(run, engine_slots=64)
    # 88 clients against 64 stated slots: the model's limiter is the slots, and the
    # rules' "limiter unclear" (R at 4 of 64) is one disagrees line under it
    assert ids(vs) == ["slot_bound"]
    v = vs[0]
    assert v.evidence_value("slots (S)") == 64
    assert next(e.source for e in v.evidence if e.name == "slots (S)") == "stated (--engine-slots)"
    assert v.evidence_value("slot limit (inferred)") is None
    lines = [str(e.value) for e in v.evidence if e.key == "disagrees"]
    assert len(lines) == 1 and "capacity (limiter unclear)" in lines[0]
    assert "The model says slots" in lines[0]
    # stated at bench time: the RunResult config carries it
    run.config["engine_slots"] = 4
    v = one(diagnose(run), "slot_bound")
    assert v.evidence_value("slot limit (inferred)") is None
    src = next(e.source for e in v.evidence if e.name == "slots (S)")
    assert src == "stated at bench time (--engine-slots)"


def test_bench_config_keeps_engine_slots_for_diagnose() -> None:
    cfg = BenchConfig.build(url="http://127.0.0.1:9", engine_slots=6, concurrency=[2])
    assert cfg.as_dict()["engine_slots"] == 6
    with pytest.raises(Exception, match="engine-slots"):
        BenchConfig.build(url="http://127.0.0.1:9", engine_slots=0)


def test_cli_engine_slots_on_a_file(tmp_path: Path) -> None:
    path = save_run_result(engine_run(running=4, waiting=84, kv=0.004), tmp_path / "run.json")
    res = runner.invoke(app, ["diagnose", str(path), "--json"])
    assert res.exit_code == 0, res.output
    doc = orjson.loads(res.stdout)
    assert doc["verdicts"][0]["id"] == "healthy"  # the records show no queue
    res = runner.invoke(app, ["diagnose", str(path), "--json", "--engine-slots", "256"])
    assert res.exit_code == 0, res.output
    doc = orjson.loads(res.stdout)["verdicts"]
    assert "slot_bound" not in [v["id"] for v in doc]
    assert any(e["name"] == "slots (S)" and e["value"] == 256 for e in doc[0]["evidence"])
    assert any(e["key"] == "disagrees" for e in doc[0]["evidence"])
    bad = runner.invoke(app, ["diagnose", str(path), "--engine-slots", "0"])
    assert isinstance(bad.exception, ConfigError) and "--engine-slots must be >= 1" in str(
        bad.exception
    )


def test_a_level_the_model_calls_slot_bound_keeps_the_rules_readings_as_evidence() -> None:
    """88 clients on 64 stated slots: the model's slot verdict carries the rules' R, Q
    and KV readings, and the rules' other reading is one disagrees line, never a
    second verdict or fix at that level."""
    vs = diagnose(engine_run(running=4, waiting=84, kv=0.004), engine_slots=64)
    assert ids(vs) == ["slot_bound"]
    v = vs[0]
    assert v.evidence_value("waiting (Q)") is not None
    assert sum(e.key == "disagrees" for e in v.evidence) == 1
    assert len(v.fixes) >= 1 and all("--max-num-seqs" in f for f in v.fixes[:1])
