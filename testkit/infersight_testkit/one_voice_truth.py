"""The one-voice truth suite (docs/design.md section 9, "One voice"): fake servers
whose binding constraint is known, each benched by a real ``bench``, and the check that
the run's recommendation names that constraint with one voice: its verdict, limiter,
knob and typed fix agree with each other (``diagnose.one_voice.agreement``) and the
limiter is the one that binds.

Slots, KV reserved at admission, KV on demand with preemption, a compute knee, prompts
prefilled in batches, mixed prompt lengths and errors; open and closed loop; one level and many.
A case is right when ``diagnose.one_voice.spoken_once`` finds nothing to say against
the run's recommendation and its limiter is one of ``Case.binds``.
``benchmarks/one_voice_truth.py`` prints the table; the integration test asserts it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from infersight_testkit.fake.config import FakeConfig

__all__ = ["CASES", "Case"]


def _srv(**kw: Any) -> FakeConfig:
    base: dict[str, Any] = {"ttft": 0.05, "itl": 0.005, "tokens": 200, "metrics_dialect": "vllm"}
    return FakeConfig(**{**base, **kw})


#: The KV-bound server of issue 44: 64 slots, KV room for 400 tokens.
KV_SERVER = _srv(slots=64, kv_capacity=400)
KV_ON_DEMAND = _srv(slots=64, kv_capacity=400, kv_mode="on_demand")
_SWEEP = [1, 2, 4, 8, 16]
_C = {"input_tokens": "fixed:20", "max_tokens": 32, "duration": 3.0}
_O = {"arrival": "poisson", "input_tokens": "fixed:20", "max_tokens": 32, "duration": 5.0}


@dataclass(frozen=True, slots=True)
class Case:
    """A fake server, the load offered, and the limiters that may be named."""

    name: str
    server: FakeConfig
    load: dict[str, Any]
    #: The binding constraint(s) a right answer names ("unknown": one level cannot tell).
    binds: tuple[str, ...]
    note: str = ""


CASES: tuple[Case, ...] = (
    Case("slots_closed", _srv(slots=4), {**_C, "concurrency": _SWEEP}, ("slots",)),
    Case("slots_one_level", _srv(slots=4), {**_C, "concurrency": [16]}, ("slots",)),
    Case("slots_open", _srv(slots=4), {**_O, "rate": [5.0, 10.0, 40.0]}, ("slots",)),
    Case(
        "kv_reserved",
        KV_SERVER,
        {**_C, "max_tokens": 80, "concurrency": _SWEEP},
        ("kv",),
        "20 + 80 tokens reserved at admission: 4 fit",
    ),
    Case(
        "kv_reserved_one_level",
        KV_SERVER,
        {**_C, "max_tokens": 20, "concurrency": [16]},
        ("kv",),
        "20 + 20 tokens: 10 fit",
    ),
    Case(
        "kv_reserved_open",
        KV_SERVER,
        {**_O, "max_tokens": 80, "rate": [4.0, 8.0, 20.0]},
        ("kv",),
    ),
    Case(
        "kv_on_demand",
        KV_ON_DEMAND,
        {**_C, "max_tokens": 80, "concurrency": _SWEEP},
        ("kv",),
        "vLLM-like: preempted when the growing answers fill the cache",
    ),
    Case(
        "kv_on_demand_one_level",
        KV_ON_DEMAND,
        {**_C, "max_tokens": 80, "concurrency": [16]},
        ("kv",),
    ),
    Case(
        "compute_closed",
        _srv(slots=16, compute_knee=2, tokens=32),
        {**_C, "concurrency": _SWEEP},
        ("compute",),
    ),
    Case(
        "compute_one_level",
        _srv(slots=16, compute_knee=2, tokens=32),
        {**_C, "concurrency": [8]},
        ("compute", "unknown"),
        "one load cannot show throughput stop growing",
    ),
    Case(
        "compute_open",
        _srv(slots=16, compute_knee=4, tokens=64, ttft=0.046, itl=0.003),
        {**_O, "max_tokens": 64, "rate": [5.0, 10.0, 33.0]},
        ("compute",),
    ),
    Case(
        "mixed_prompts",
        _srv(slots=8, prefill_per_token=1e-4),
        {**_C, "input_tokens": "uniform:16:1024", "concurrency": [1, 2, 4, 8]},
        ("none",),
    ),
    Case(
        "prefill_batched_open",
        _srv(slots=8, ttft=0.02, itl=0.01, tokens=32, prefill_per_token=1e-3, batch_prefill=True),
        {**_O, "input_tokens": "fixed:100", "rate": [3.0, 6.0, 14.0]},
        ("compute",),
        "prompts prefilled together wait for each other: 0.1 s each, 10 req/s at most; "
        "the 8 slots fill past it, and more would not help",
    ),
    Case("light_load", _srv(slots=16), {**_C, "concurrency": [1, 2, 4]}, ("none",)),
    Case(
        "errors",
        _srv(slots=8, error_rate=0.1, error_seed=7),
        {**_O, "rate": [5.0, 10.0]},
        ("upstream",),
    ),
)
