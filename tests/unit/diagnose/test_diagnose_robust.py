"""Diagnosis never fails on odd input, and the CPU microbenchmark keeps its best."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infersight.core.records import RequestRecord, RunResult, Sample
from infersight.diagnose import VERDICT_IDS, diagnose
from infersight.diagnose.physics import hardware

NAMES = [
    "engine.requests_running",
    "engine.requests_waiting",
    "engine.kv_cache_usage",
    "engine.preemptions_total",
    "engine.slots",
    "gpu.utilization",
    "gpu.sm_activity",
    "process.cpu_percent",
    "host.cpu_percent",
]


@st.composite
def records(draw: st.DrawFn) -> RequestRecord:
    t = draw(st.floats(0, 100))
    r = RequestRecord(request_id="x", scheduled=t)
    if draw(st.booleans()):
        r.sent = t + draw(st.floats(0, 0.1))
        n = draw(st.integers(0, 5))
        gaps = draw(st.lists(st.floats(0, 1), min_size=n, max_size=n))
        base = r.sent + draw(st.floats(0, 2))
        acc = base
        for g in gaps:
            r.chunk_times.append(acc)
            r.chunk_tokens.append(1)
            acc += g
        r.end = acc + 0.001
        r.ok = draw(st.booleans())
        r.error = None if r.ok else draw(st.sampled_from(["AuthError", "RateLimited", None]))
        r.prompt_tokens = draw(st.one_of(st.none(), st.integers(0, 5000)))
        r.completion_tokens = draw(st.one_of(st.none(), st.integers(0, 50)))
        r.queue_delay = draw(st.one_of(st.none(), st.floats(0, 5)))
    r.cancelled = draw(st.booleans())
    r.labels = {"level": draw(st.sampled_from(["a", "b"]))}
    return r


samples = st.builds(
    Sample,
    t=st.floats(0, 110),
    name=st.sampled_from(NAMES),
    value=st.one_of(st.none(), st.floats(-1, 300), st.just(float("nan"))),
    labels=st.sampled_from(
        [
            {},
            {"engine": "vllm"},
            {"name": "engine"},
            {"gpu": "0"},
            {"cpu": "all"},
            {"engine": "llamacpp", "stat": "p50"},
        ]
    ),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    recs=st.lists(records(), max_size=30),
    smp=st.lists(samples, max_size=60),
    window=st.one_of(st.none(), st.floats(0.5, 50)),
)
def test_diagnose_total_on_random_runs(
    recs: list[RequestRecord], smp: list[Sample], window: float | None
) -> None:
    run = RunResult(
        records=recs,
        samples=smp,
        config={"engine": {"engine": "vllm", "url": "u"}},
        environment={"gpus": [{"name": "NVIDIA L4"}]},
    )
    vs = diagnose(run, window_seconds=window)
    if recs or any(s.value is not None and math.isfinite(s.value) for s in smp):
        assert vs  # every window gets at least one verdict ("healthy" if nothing else)
    for v in vs:
        assert v.id in VERDICT_IDS
        assert 0 <= v.confidence <= 1
        assert v.window.end >= v.window.start
        json.dumps(v.model_dump(mode="json"), allow_nan=False)  # strict JSON


def test_cpu_microbenchmark_keeps_best(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    hardware.measure_cpu.cache_clear()
    try:
        d = hardware.measure_cpu(0.4)
        assert d.kind == "cpu" and d.measured and d.cores >= 1
        assert 1e8 < d.bandwidth < 1e12 and 1e8 < d.peak_flops() < 1e14
        cache = json.loads((tmp_path / "infersight" / "cpu_peaks.json").read_text())
        ((host, best),) = cache.items()
        best["flops_per_core"] *= 1000  # a better earlier run is kept, never lowered
        (tmp_path / "infersight" / "cpu_peaks.json").write_text(json.dumps({host: best}))
        hardware.measure_cpu.cache_clear()
        d2 = hardware.measure_cpu(0.4)
        assert d2.peak_flops() == pytest.approx(best["flops_per_core"] * d2.cores)
        assert d2.with_cores(1).peak_flops() == pytest.approx(best["flops_per_core"])
    finally:
        hardware.measure_cpu.cache_clear()
