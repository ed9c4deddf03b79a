"""Verdicts from real, short runs of the embedded llama.cpp engine (docs/design.md s.5).

The states a CPU can make: under-loaded (1 client, 16 slots), slot-bound (32 clients,
2 slots), client-limited (a load generator whose event loop is hogged) and
error-driven (a stale API key). Runs are a few seconds each with tiny outputs. The
box is shared and noisy, so each test asserts its own verdict and evidence; other
verdicts the noise may add (host_starved, client_limited) are allowed beside it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from infersight.core.records import RequestRecord, RunResult
from infersight.diagnose import Verdict, diagnose

pytestmark = [pytest.mark.engine, pytest.mark.timeout(240)]

KEY = "sk-infersight-test-" + uuid.uuid4().hex[:8]


def one(vs: list[Verdict], vid: str) -> Verdict:
    found = [v for v in vs if v.id == vid]
    assert found, f"no {vid} verdict in {[(v.id, v.summary) for v in vs]}"
    return found[0]


def _bench(**kw: Any) -> RunResult:
    from infersight.bench import BenchConfig
    from infersight.entrypoints.bench import bench_and_diagnose

    cfg = BenchConfig(
        progress=False,
        diagnose=False,
        warmup="0",
        cooldown="0",
        input_tokens="fixed:24",
        sample_interval=0.25,
        grace=2.0,
        **kw,
    )
    return bench_and_diagnose(cfg)


@pytest.fixture(scope="module")
def key_engine() -> Iterator[Any]:
    """A 2-slot embedded engine that requires an API key."""
    from infersight.engine import EmbeddedEngine

    with EmbeddedEngine(parallel=2, ctx=2 * 512, api_key=KEY) as eng:
        yield eng


def test_under_loaded_one_client_sixteen_slots() -> None:
    # 32 tokens a request, so decoding (one sequence: bandwidth-bound, low MFU) is most
    # of the time. With 4 the prompt's prefill is 85% of each request, and on a 2-core
    # box one prefill uses half the CPU's measured FLOP/s: not under-loaded by the rule.
    r = _bench(
        engine_parallel=16,
        engine_ctx=16 * 256,
        concurrency=[1],
        duration=4.0,
        max_tokens=32,
        ignore_eos=True,
    )
    assert any(rec.ok for rec in r.records)
    v = one(diagnose(r), "under_loaded")
    assert v.engine == "embedded"
    assert v.evidence_value("slots (S)") == 16
    assert 0.2 <= v.evidence_value("running (R)") <= 1.5
    assert v.evidence_value("waiting (Q)") < 0.1
    # one level measures no knee, so the CPU's compute ceiling is not calibrated: no MFU
    # from a generic matmul figure, and the summary says the compute use is unknown
    assert v.evidence_value("SM activity / MFU") is None and "compute use unknown" in v.summary
    # the diagnosis states observed ITL against the computed CPU floor
    assert v.evidence_value("ITL / floor") >= 1.0
    assert any("concurren" in f for f in v.fixes)


def test_slot_bound_two_slots_thirty_two_clients() -> None:
    r = _bench(engine_parallel=2, engine_ctx=2 * 256, concurrency=[32], duration=6.0, max_tokens=4)
    v = one(diagnose(r), "slot_bound")
    assert v.engine == "embedded"
    assert v.evidence_value("slots (S)") == 2
    assert v.evidence_value("running (R)") >= 1.7
    assert v.evidence_value("waiting (Q)") >= 10
    # one level checks no model: the knob, and why it gives no number (never the 32
    # clients, and no CPU matmul figure)
    assert v.evidence_value("recommended slots") is None
    assert "raise infersight serve --parallel above 2" in v.fixes[0], v.fixes
    assert "fewer than two usable levels" in v.fixes[0]


def test_error_driven_api_key_mismatch(key_engine: Any) -> None:
    from infersight.client import Client, RetryPolicy
    from infersight.core.errors import InfersightError
    from infersight.telemetry import EngineScraper, HostSampler, Recorder

    async def main() -> RunResult:
        rec = Recorder(
            [
                HostSampler(processes={"engine": key_engine.pid}),
                EngineScraper(f"{key_engine.base_url}/metrics", api_key=KEY),
            ],
            interval=0.25,
        )
        records: list[RequestRecord] = []
        body = {
            "model": key_engine.model_name,
            "max_tokens": 2,
            "stream": True,
            "messages": [{"role": "user", "content": "Say hi."}],
        }
        async with (
            rec,
            Client(key_engine.base_url, api_key=KEY, retry=RetryPolicy(max_attempts=1)) as good,
            Client(
                key_engine.base_url, api_key="sk-stale-0000", retry=RetryPolicy(max_attempts=1)
            ) as bad,
        ):

            async def send(c: Client) -> None:
                r = RequestRecord(
                    request_id=uuid.uuid4().hex[:8],
                    scheduled=time.monotonic(),
                    labels={"level": "mixed"},
                )
                with contextlib.suppress(InfersightError):
                    await c.request("/v1/chat/completions", body, record=r)
                records.append(r)

            await asyncio.gather(*(send(good) for _ in range(4)), *(send(bad) for _ in range(6)))
        result = RunResult(
            config={"engine": key_engine.settings, "levels": [{"name": "mixed"}]}, records=records
        )
        rec.write_to(result)
        return result

    result = asyncio.run(main())
    assert sum(r.ok for r in result.records) == 4
    v = one(diagnose(result), "error_driven")
    assert v.evidence_value("errors: AuthError") == 6
    assert v.evidence_value("error rate") == pytest.approx(0.6)
    assert v.evidence_value("from: HTTP 401") == 6
    assert "AuthError" in v.summary and "API key" in v.fixes[0]
    assert KEY not in v.model_dump_json()  # the key never appears in a verdict


def test_client_limited_starved_load_generator(key_engine: Any, monkeypatch: Any) -> None:
    from infersight.bench import BenchConfig, run_async

    monkeypatch.setenv("DIAG_TEST_KEY", KEY)

    async def main() -> RunResult:
        stop = asyncio.Event()

        async def hog() -> None:
            # Blocks the load generator's event loop 40 ms of every 60: sends run late.
            while not stop.is_set():
                time.sleep(0.04)  # noqa: ASYNC251 - blocking on purpose
                await asyncio.sleep(0.02)  # let the rest of the loop run a little

        task = asyncio.create_task(hog())
        try:
            cfg = BenchConfig(
                url=key_engine.base_url,
                api_key_env="DIAG_TEST_KEY",
                rate=[10.0],
                requests=8,
                max_tokens=2,
                progress=False,
                diagnose=False,
                warmup="0",
                cooldown="0",
                input_tokens="fixed:16",
                sample_interval=0.25,
            )
            return await run_async(cfg)
        finally:
            stop.set()
            await task

    result = asyncio.run(main())
    v = one(diagnose(result), "client_limited")
    assert v.evidence_value("schedule lag p99") > 0.005
    assert any("schedule lag" in str(e.value) for e in v.evidence if e.name == "reason")
    assert result.client_limited


def test_diagnose_live_url_window(key_engine: Any) -> None:
    from infersight.telemetry import sample_url

    result = sample_url(
        key_engine.base_url, 3.0, api_key=KEY, probe=True, interval=0.5, max_tokens=4
    )
    names = {s.name for s in result.samples}
    assert {"engine.requests_running", "engine.slots", "host.cpu_percent"} <= names
    assert result.config["engine"]["engine"] == "llamacpp"
    assert any(r.ok for r in result.records)  # the probes went through with the key
    vs = diagnose(result)
    assert vs and all(v.engine == "llamacpp" for v in vs)
    # one prober on 2 slots: nothing queues, so no queueing verdict
    assert not {"slot_bound", "kv_bound", "capacity"} & {v.id for v in vs}
    assert "client_limited" not in {v.id for v in vs}  # probes are no load generator
    slots = [v.evidence_value("slots (S)") for v in vs if v.evidence_value("slots (S)")]
    assert slots and set(slots) == {2}


def test_the_demo_sweeps_fix_agrees_with_its_own_curve() -> None:
    """The demo's sweep (``--sweep closed``), shortened: whatever this shared box makes
    of the levels, the run's one fix never contradicts its curve (docs/design.md section
    5), the levels double until two add nothing with the slots full, and llama.cpp's
    normal streams (a chunk may carry several tokens) raise no token flag."""
    from infersight.diagnose import embed_diagnosis

    r = _bench(engine_parallel=8, engine_ctx=8 * 256, sweep="closed", requests=16, max_tokens=10)
    embed_diagnosis(r)
    curve, rec = r.capacity_curve, r.recommendation
    assert curve is not None and rec is not None
    names = list(r.aggregates)  # the order they ran in
    assert names == [f"c={2**k}" for k in range(len(names))] and 3 <= len(names) <= 6, names
    # the engine's 8 slots are known: no plateau is called before the clients fill them
    assert len(names) >= 4, names
    thr = [r.aggregates[n]["request_throughput"] for n in names]
    if len(names) < 6:  # ended on two levels that added under 10% to the best before them
        assert all(thr[i] < 1.1 * max(thr[:i]) for i in (-2, -1)), thr
    assert r.self_check is not None and r.self_check.method == "leave-one-level-out"
    for n in names:
        tokens = next(c for c in r.aggregates[n]["validity"] if c["check"] == "tokens")
        assert tokens["ok"], tokens
    fixes = [f for v in r.diagnosis for f in v.fixes]
    if curve.plateau == "compute":
        assert not (rec.knob == "slots" and rec.direction == "up")
        assert not any(v.turns("slots", "up") for v in r.diagnosis), fixes
    if curve.knee_reached and curve.knee and rec.knob == "slots":
        assert (rec.target or 0) <= 2 * round(curve.knee)
    if rec.direction == "up" and rec.knob in ("slots", "replicas"):
        assert not any(v.turns("replicas", "down") for v in r.diagnosis), fixes
    targets = {v.evidence_value("recommended_slots") for v in r.diagnosis} - {None}
    if rec.knob == "slots":  # one number for the slots in every output
        assert targets <= {rec.target}, (targets, rec)
