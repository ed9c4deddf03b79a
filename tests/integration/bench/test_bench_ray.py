"""``bench --ray``: one schedule driven by workers on two Ray nodes (a real local
cluster: ``ray start --head`` plus a node joined with ``ray start --address``), against
the fake OpenAI server on loopback."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from infersight.bench import BenchConfig, run
from infersight.bench.schedule import open_loop_schedule
from infersight.core.listen import free_port
from infersight.core.records import RunResult, load_run_result
from infersight_testkit.fake.openai import FakeConfig, FakeOpenAI
from infersight_testkit.ray_cluster import LocalRayCluster
from realparts import real_part_path

pytestmark = pytest.mark.timeout(600)
needs_ray = pytest.mark.needs("ray")

RATE, REQUESTS = 8.0, 32


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalRayCluster]:
    ray_cli = real_part_path("ray")
    assert ray_cli is not None  # the needs("ray") mark skipped or failed the test before
    c = LocalRayCluster(ray_cli, free_port())
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="module")
def fake() -> Iterator[Any]:
    """TTFT 50 ms, then a token every 10 ms, 20 tokens."""
    with FakeOpenAI.subprocess(FakeConfig(ttft=0.05, itl=0.01, tokens=20)) as srv:
        yield srv


def _flags(url: str) -> list[str]:
    return [
        "--url",
        url,
        "--poisson",
        str(RATE),
        "--requests",
        str(REQUESTS),
        "--seed",
        "7",
        "--max-tokens",
        "20",
        "--input-tokens",
        "fixed:16",
        "--warmup",
        "0",
        "--cooldown",
        "0",
        "--no-diagnose",
        "--no-progress",
    ]


def _bench(args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-c", "from infersight.cli import main; main()", "bench", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)


def _index(r: Any) -> int:
    return int(r.request_id.rsplit("-", 1)[1])


@needs_ray
def test_open_loop_across_two_nodes_matches_one_process(
    cluster: LocalRayCluster, fake: Any, tmp_path: Path
) -> None:
    out = tmp_path / "ray"
    proc = _bench(
        [*_flags(fake.base_url), "--ray", cluster.address, "--workers", "2", "--out", str(out)]
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    result = load_run_result(out / "result.json")

    # Every scheduled request exactly once, at the instant one process would send it.
    recs = result.records
    assert sorted(_index(r) for r in recs) == list(range(REQUESTS))
    offsets = open_loop_schedule(RATE, arrival="poisson", requests=REQUESTS, seed=7)
    by = {_index(r): r for r in recs}
    t0 = by[0].scheduled
    for i, r in by.items():
        assert r.scheduled - t0 == pytest.approx(float(offsets[i]), abs=1e-6), i

    # Placement: one worker on each node, and each node sent its share.
    ray_env = result.environment["ray"]
    workers = {str(w["worker"]): w for w in ray_env["workers"]}
    assert len({w["node_id"] for w in workers.values()}) == 2 == ray_env["nodes"]
    assert {w["ip"] for w in workers.values()} == {"127.0.0.2", "127.0.0.3"}
    sent_by = Counter(r.labels["worker"] for r in recs)
    assert sent_by == {"0": REQUESTS // 2, "1": REQUESTS // 2}
    assert any("load from 2 Ray worker(s) on 2 node(s)" in n for n in result.notes)
    assert "Ray worker(s) on 2 node(s)" in proc.stdout  # every output says so

    # Clocks: both nodes are this host, whose monotonic clock is one, so the true
    # offset is 0: the measured interval must hold it.
    for w in workers.values():
        (clock,) = w["clock"]
        assert clock["probes"] >= 8 and clock["uncertainty_s"] == pytest.approx(clock["rtt_s"] / 2)
        assert abs(clock["offset_s"]) <= clock["uncertainty_s"] + 1e-9, clock

    # The client-limited flag was judged per worker, on each worker's own figures.
    agg = result.aggregates[f"r={RATE:g}"]
    judged = agg["client_limited"]["workers"]
    assert sorted(w["worker"] for w in judged) == ["0", "1"]
    assert all(w["requests"] == REQUESTS // 2 for w in judged)
    # The workers' own process samples came back, on the driver's time axis.
    hosts = {s.labels.get("worker") for s in result.samples if s.name == "process.cpu_percent"}
    assert {"0", "1"} <= hosts
    span = (min(r.scheduled for r in recs) - 5, max(r.end or 0 for r in recs) + 5)
    assert all(span[0] <= s.t <= span[1] for s in result.samples if "worker" in s.labels)

    # The same aggregates as one process with the same seed, within noise.
    single = run(BenchConfig(**_cfg(fake.base_url)))
    _same_aggregates(result, single)


def _cfg(url: str, **kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "url": url,
        "rate": [RATE],
        "arrival": "poisson",
        "requests": REQUESTS,
        "seed": 7,
        "max_tokens": 20,
        "input_tokens": "fixed:16",
        "warmup": "0",
        "cooldown": "0",
        "diagnose": False,
        "progress": False,
    }
    return {**base, **kw}


def _same_aggregates(a: RunResult, b: RunResult) -> None:
    (x,), (y,) = a.aggregates.values(), b.aggregates.values()
    assert x["requests"]["ok"] == y["requests"]["ok"] == REQUESTS
    assert x["tokens"]["output"] == y["tokens"]["output"]
    # The fake's timing is exact; what differs is the two runs' noise on a shared box.
    assert x["ttft"]["p50"] == pytest.approx(y["ttft"]["p50"], abs=0.015)
    assert x["itl"]["p50"] == pytest.approx(y["itl"]["p50"], abs=0.003)
    assert x["e2e"]["p50"] == pytest.approx(y["e2e"]["p50"], abs=0.02)
    assert x["request_throughput"] == pytest.approx(y["request_throughput"], rel=0.1)


@needs_ray
def test_closed_loop_deals_every_index_once_and_measures_clocks_again(
    cluster: LocalRayCluster, fake: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # "auto": the cluster this host belongs to, here named by RAY_ADDRESS.
    monkeypatch.setenv("RAY_ADDRESS", cluster.address)
    cfg = BenchConfig(
        **_cfg(
            fake.base_url,
            rate=[],
            concurrency=[3],
            requests=None,
            duration=3.0,
            ray="auto",
            workers=2,
            ray_strategy="strict-spread",
            ray_clock_interval=0.5,
        )
    )
    result = run(cfg)
    recs = result.records
    idx = sorted(_index(r) for r in recs)
    assert len(idx) == len(set(idx)) and len(idx) >= 10  # no index sent twice
    # The duration ends each user where it is: only the last round may leave gaps.
    assert len(set(range(max(idx) + 1)) - set(idx)) <= 3
    users = Counter(r.labels["worker"] for r in recs)
    assert set(users) == {"0", "1"} and users["0"] > users["1"]  # 2 users vs 1
    workers = result.environment["ray"]["workers"]
    assert len({w["node_id"] for w in workers}) == 2  # strict-spread: one per node
    for w in workers:
        (clock,) = w["clock"]
        assert len(clock["remeasured"]) >= 2  # measured again during the level
        assert clock["drift_s"] == 0.0  # one host, one clock: no drift can be proven
        for again in clock["remeasured"]:
            assert abs(again["offset_s"]) <= again["uncertainty_s"] + 1e-9


@needs_ray
def test_a_trace_replay_is_one_schedule_across_ray_workers(
    cluster: LocalRayCluster, fake: Any, tmp_path: Path
) -> None:
    """Each actor reads the trace (one path on this host) and sends its share."""
    times = [0, 3, 6, 9, 200, 204, 420, 421, 422, 700]  # ms, with a burst
    trace = tmp_path / "trace.csv"
    trace.write_text("".join(f"{t / 1000},{8 + i},3\n" for i, t in enumerate(times)))
    result = run(
        BenchConfig(
            url=fake.base_url,
            trace=str(trace),
            ray=cluster.address,
            workers=2,
            ignore_eos=True,
            diagnose=False,
            progress=False,
        )
    )
    recs = sorted(result.records, key=lambda r: int(r.labels["line"]))
    assert [int(r.labels["line"]) for r in recs] == list(range(1, 11))  # each line once
    t0 = recs[0].scheduled
    assert [r.scheduled - t0 for r in recs] == pytest.approx([t / 1000 for t in times], abs=1e-6)
    assert [r.labels["worker"] for r in recs] == ["0", "1"] * 5
    assert [r.prompt_tokens for r in recs] == [8 + i for i in range(10)]


def test_without_ray_the_flag_says_how_to_install_it(fake: Any) -> None:
    # This interpreter without the ray package (as after a plain `pip install infersight`).
    code = "import sys; sys.modules['ray'] = None; from infersight.cli import main; main()"
    cmd = [sys.executable, "-c", code, "bench", *_flags(fake.base_url), "--ray", "auto"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=dict(os.environ))
    assert proc.returncode != 0
    err = (proc.stdout + proc.stderr).strip()
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1 and "pip install 'infersight[ray]'" in lines[0], err
