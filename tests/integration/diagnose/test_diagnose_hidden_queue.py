"""End to end: requests the engine's /metrics does not count, against a server that
speaks llama.cpp's /metrics and /props (infersight_testkit's fake server in its own
process, bench over loopback).

- Each request first spends 0.25 s in the engine's HTTP front (reading, tokenizing),
  where llama.cpp counts it neither running nor deferred. Four users on eight slots
  are not queueing, though most scrapes see fewer running than the client has in
  flight (on CI a real llama.cpp did this at c=4, and was called "capacity").
- Sixteen users on four slots, where the engine lists none of the twelve it cannot
  run (an HTTP accept backlog), are slot-bound with twelve waiting.
"""

from __future__ import annotations

from typing import Any

import pytest

from infersight.bench import BenchConfig
from infersight.core.records import RunResult
from infersight.entrypoints.bench import bench_and_diagnose
from infersight_testkit.fake.openai import FakeConfig, FakeOpenAI

pytestmark = pytest.mark.timeout(120)

QUEUE_IDS = {"slot_bound", "kv_bound", "capacity"}


def _bench(concurrency: int, **kw: Any) -> RunResult:
    cfg = FakeConfig(ttft=0.1, itl=0.01, tokens=10, metrics_dialect="llamacpp", **kw)
    with FakeOpenAI.subprocess(cfg) as srv:
        url = srv.base_url
        bench = BenchConfig(
            url=url,
            scrape=[url + "/metrics"],
            sample_interval=0.2,
            concurrency=[concurrency],
            duration=4.0,
            max_tokens=10,
            input_tokens="fixed:16",
            progress=False,
            diagnose=True,
        )
        return bench_and_diagnose(bench)


def _values(result: RunResult, name: str) -> list[float]:
    return [float(s.value) for s in result.samples if s.name == name and s.value is not None]


def test_requests_in_the_engines_http_front_are_not_a_queue() -> None:
    result = _bench(4, slots=8, front_delay=0.25)
    # The engine never listed a request waiting, and often ran fewer than 4...
    assert max(_values(result, "engine.requests_waiting")) == 0
    running = _values(result, "engine.requests_running")
    assert sum(r < 4 for r in running) >= len(running) // 3, running
    # ...while nothing queued: 4 users, 8 slots.
    ids = [v.id for v in result.diagnosis]
    assert not QUEUE_IDS & set(ids), [v.summary for v in result.diagnosis]
    assert all(r.ok for r in result.records)


def test_a_backlog_the_engine_does_not_list_is_slot_bound() -> None:
    result = _bench(16, slots=4, hide_waiting=True)
    assert max(_values(result, "engine.requests_waiting")) == 0
    v = next((v for v in result.diagnosis if v.id == "slot_bound"), None)
    assert v is not None, [d.summary for d in result.diagnosis]
    assert v.evidence_value("waiting") >= 10.0, v.summary
    assert v.evidence_value("slots (S)") == 4
    assert "before the engine's scheduler" in next(
        e.source for e in v.evidence if e.key == "waiting"
    )
    # one level: the knob, and why no number
    assert "raise --parallel above 4" in v.fixes[0], v.fixes
