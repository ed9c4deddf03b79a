"""End to end: bench against a server with 4 slots that speaks vLLM's /metrics (no
slot limit exported) ends with the slot-bound verdict and vLLM's setting; with a full
KV cache it ends KV-bound (infersight_testkit's fake server in its own process)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from infersight.bench import BenchConfig
from infersight.core.records import RunResult
from infersight.core.verdicts import Verdict
from infersight.entrypoints.bench import bench_and_diagnose
from infersight_testkit.fake.openai import FakeConfig, FakeOpenAI

pytestmark = pytest.mark.timeout(120)

#: 4 slots, 0.2 s to the first token then 4 more tokens 10 ms apart: ~0.24 s a request.
SLOTS = 4


def _server(**kw: Any) -> Iterator[Any]:
    cfg = FakeConfig(ttft=0.2, itl=0.01, tokens=5, slots=SLOTS, metrics_dialect="vllm", **kw)
    with FakeOpenAI.subprocess(cfg) as srv:
        yield srv


@pytest.fixture(scope="module")
def vllm_4_slots() -> Iterator[Any]:
    yield from _server(kv_usage=0.004)


def _bench(url: str, **kw: Any) -> RunResult:
    cfg = BenchConfig(
        url=url,
        scrape=[url + "/metrics"],
        sample_interval=0.25,
        concurrency=[32],
        duration=4.0,
        max_tokens=5,
        input_tokens="fixed:16",
        progress=False,
        diagnose=True,
        **kw,
    )
    return bench_and_diagnose(cfg)


def _ids(result: RunResult) -> list[str]:
    return [v.id for v in result.diagnosis]


def _ev(verdict: Verdict, name: str) -> Any:
    return verdict.evidence_value(name)


def test_vllm_shaped_server_is_slot_bound(vllm_4_slots: Any) -> None:
    result = _bench(vllm_4_slots.base_url)
    assert result.diagnosis, result.notes
    assert any(s.name == "engine.requests_waiting" for s in result.samples)
    assert not any(s.name == "engine.slots" and s.value for s in result.samples)
    assert "slot_bound" in _ids(result), [v.summary for v in result.diagnosis]
    assert "capacity" not in _ids(result)
    v = next(v for v in result.diagnosis if v.id == "slot_bound")
    m = re.fullmatch(
        r"R stays at 4 with (\d+) waiting: the slot limit is 4",
        str(_ev(v, "slot limit (inferred)")),
    )
    assert m and int(m.group(1)) >= 16, _ev(v, "slot limit (inferred)")
    # the slots the model found agree with R's plateau; one level gives no number
    assert result.server_model is not None and result.server_model.slots.value == SLOTS
    assert "raise --max-num-seqs above 4" in v.fixes[0], v.fixes
    assert v.engine == "vllm"


def test_stated_engine_slots_is_kept_and_used(vllm_4_slots: Any) -> None:
    result = _bench(vllm_4_slots.base_url, engine_slots=SLOTS)
    assert result.config["engine_slots"] == SLOTS
    v = next(v for v in result.diagnosis if v.id == "slot_bound")
    assert _ev(v, "slot limit (inferred)") is None
    src = next(e.source for e in v.evidence if e.name == "slots (S)")
    assert src == "stated at bench time (--engine-slots)"


def test_kv_full_server_is_kv_bound() -> None:
    for srv in _server(kv_per_running=0.25):  # 4 running fill the KV cache
        result = _bench(srv.base_url)
    assert "kv_bound" in _ids(result), [v.summary for v in result.diagnosis]
    assert "slot_bound" not in _ids(result)
