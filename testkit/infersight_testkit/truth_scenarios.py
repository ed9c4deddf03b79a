"""Named test servers whose true limits are known, and the bench load to run on each.

A performance model fitted from a bench run is checked against these: each
:class:`Scenario` is a fake server (:class:`~infersight_testkit.FakeConfig`: slots,
KV capacity, a compute knee, prefill and decode step times, injected errors) with the
load to offer it (``BenchConfig`` fields), and :meth:`Scenario.truth` says what the
server really is: its limits, its step times, its capacity and the limiter the run
should find. ``benchmarks/model_truth.py`` runs them and saves the runs beside the
truth.

The fake's engine model (see ``fake.openai``): a request holds a slot (and, with a KV
capacity, its prompt plus answer tokens) from admission to its last token; its first
step takes ``ttft + prefill_per_token * prompt_tokens``, every later one ``itl``, and
while more than ``compute_knee`` requests run every step takes ``running / knee``
times longer; with ``batch_prefill`` the prompts admitted together share one prefill
step, so prompts' prefill takes turns. So alone a request takes ``service_s``, and at most
``min(slots, fit, knee)`` requests' worth of work completes per ``service_s``.
"""

from __future__ import annotations

import csv
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infersight_testkit.fake.config import FakeConfig

__all__ = ["LIMITERS", "SCENARIOS", "Scenario", "bursty_trace_rows", "scenario", "write_trace"]

#: The limiters a scenario can name.
LIMITERS = ("slots", "kv", "compute", "client", "upstream", "none")


@dataclass(frozen=True, slots=True)
class Scenario:
    """One fake server and the bench load offered to it."""

    name: str
    description: str
    #: The fake server, or None for the embedded engine (``engine_parallel`` in ``load``).
    server: FakeConfig | None
    #: BenchConfig fields (levels, duration, lengths); ``url`` is added by the runner.
    load: dict[str, Any]
    #: What limits throughput at the highest level (one of ``LIMITERS``).
    limiter: str
    #: Limiter per level name where it differs from ``limiter`` (e.g. "none" below it).
    level_limiters: dict[str, str] = field(default_factory=dict)
    #: Overrides of ``load`` for a shorter run (``--quick``).
    quick: dict[str, Any] = field(default_factory=dict)
    #: Rows ``(seconds, input_tokens, output_tokens)`` of a trace to write and replay.
    trace: tuple[tuple[float, int, int], ...] = ()

    def bench_load(self, *, quick: bool = False) -> dict[str, Any]:
        """The BenchConfig fields of the load (the trace path is the runner's)."""
        return {**self.load, **(self.quick if quick else {})}

    def truth(self) -> dict[str, Any]:
        """The server's true limits and step times, and the expected limiter."""
        s = self.server
        if s is None:
            # The embedded engine: only its slots are set; its step times are measured.
            return {
                "name": self.name,
                "description": self.description,
                "limiter": self.limiter,
                "level_limiters": self.level_limiters,
                "slots": self.load.get("engine_parallel"),
                "kv_capacity_tokens": None,
                "compute_knee": None,
                "step_time": None,
                "error_rate": 0.0,
                "server": "embedded engine",
                "load": self.load,
            }
        prompt = _mean_prompt(self.load.get("input_tokens", "fixed:64"))
        out = int(self.load.get("max_tokens", s.tokens))
        first = s.ttft + s.prefill_per_token * prompt
        service = first + s.itl * (out - 1)
        fit = None if s.kv_capacity is None else max(1, s.kv_capacity // (prompt + out))
        width = (
            min(x for x in (s.slots, fit, s.compute_knee) if x is not None)
            if (s.slots or fit or s.compute_knee)
            else None
        )
        capacity = None if width is None or service <= 0 else width / service
        # prompts prefilled together take turns in one prefill step: at most one
        # prompt's prefill a ``prefill_per_token * prompt`` seconds
        own = s.prefill_per_token * prompt
        if s.batch_prefill and own > 0:
            capacity = min(capacity or float("inf"), 1.0 / own)
        return {
            "name": self.name,
            "description": self.description,
            "limiter": self.limiter,
            "level_limiters": self.level_limiters,
            "slots": s.slots,
            "kv_capacity_tokens": s.kv_capacity,
            "kv_fit_requests": fit,
            "compute_knee": s.compute_knee,
            "step_time": {
                "first_s": s.ttft,
                "prefill_per_token_s": s.prefill_per_token,
                "prefill": "batched" if s.batch_prefill else "each",
                "decode_s": s.itl,
                "pace": "max(1, running / compute_knee)" if s.compute_knee else "1",
            },
            "mean_prompt_tokens": prompt,
            "output_tokens": out,
            "service_s": service,
            "capacity_rps": capacity,
            "error_rate": s.error_rate,
            "error_status": s.error_status if s.error_rate else None,
            "server": dataclasses.asdict(s),
            "load": self.load,
        }


def _mean_prompt(spec: str) -> float:
    """The mean of a ``fixed:N`` / ``uniform:A:B`` length (what these scenarios use)."""
    kind, _, rest = spec.partition(":")
    vals = [float(v) for v in rest.split(":")]
    return (vals[0] + vals[1]) / 2 if kind == "uniform" else vals[0]


def bursty_trace_rows(seconds: float = 12.0) -> tuple[tuple[float, int, int], ...]:
    """Bursts of 16 arrivals within 0.15 s every 3 s, and one arrival every 0.5 s
    between them (a deterministic trace, so every run replays the same arrivals)."""
    rows: list[tuple[float, int, int]] = []
    t = 0.0
    while t < seconds:
        rows += [(round(t + 0.01 * i, 3), 64, 32) for i in range(16)]
        rows += [(round(t + 0.5 * k, 3), 64, 32) for k in range(1, 6)]
        t += 3.0
    return tuple(sorted(rows))


def write_trace(sc: Scenario, folder: Path) -> Path:
    """Write the scenario's trace as a plain CSV (bench ``--trace``) in ``folder``."""
    path = folder / f"{sc.name}.csv"
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["timestamp", "input_tokens", "output_tokens"])
        w.writerows(sc.trace)
    return path


def _srv(**kw: Any) -> FakeConfig:
    # Every server speaks vLLM's /metrics, so a run also has the engine's running and
    # waiting counts to fit against.
    base: dict[str, Any] = {"ttft": 0.05, "itl": 0.005, "tokens": 32, "metrics_dialect": "vllm"}
    return FakeConfig(**{**base, **kw})


_CLOSED = {"input_tokens": "fixed:32", "max_tokens": 32, "duration": 4.0}
_OPEN = {"arrival": "poisson", "input_tokens": "fixed:32", "duration": 8.0}
#: 16 slots, a knee at 4 and 0.235 s alone: 4 / 0.235 = 17 req/s.
_COMPUTE = _srv(slots=16, compute_knee=4, ttft=0.046, itl=0.003, tokens=64)
_SLOTS_SWEEP = [1, 2, 4, 8, 16]


def _slots_n(n: int) -> Scenario:
    return Scenario(
        f"slots_{n}",
        f"{n} slots, compute knee 6: the slot count alone differs between "
        "slots_2, slots_4 and slots_8",
        _srv(slots=n, compute_knee=6),
        {**_CLOSED, "concurrency": _SLOTS_SWEEP},
        "slots" if n < 6 else "compute",
        {f"c={c}": "none" for c in _SLOTS_SWEEP if c <= min(n, 6)},
        quick={"duration": 2.5},
    )


def _engine(p: int) -> Scenario:
    # Short answers: the embedded engine on a few shared CPU cores is slow.
    load = {
        "engine_parallel": p,
        "concurrency": _SLOTS_SWEEP,
        "input_tokens": "fixed:16",
        "max_tokens": 16,
        "duration": 5.0,
    }
    return Scenario(
        f"engine_parallel_{p}",
        f"the embedded engine at --parallel {p} (CPU): slots known, compute measured",
        None,
        load,
        "slots" if p == 1 else "compute",
        {"c=1": "none"},
        quick={"duration": 3.0},
    )


SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "open_compute",
        "16 slots, decode saturates at 4 running; open loop",
        _COMPUTE,
        {**_OPEN, "rate": [5.0, 10.0, 33.0], "max_tokens": 64},
        "compute",
        {"r=5": "none", "r=10": "none"},
        quick={"duration": 5.0},
    ),
    Scenario(
        "open_compute_15",
        "open_compute's server at 15 req/s alone (held out)",
        _COMPUTE,
        {**_OPEN, "rate": [15.0], "max_tokens": 64, "duration": 15.0},
        "none",
        quick={"duration": 8.0},
    ),
    Scenario(
        "closed_slots",
        "4 slots, no compute knee; closed loop",
        _srv(slots=4),
        {**_CLOSED, "concurrency": [1, 2, 4, 8, 16, 32, 64]},
        "slots",
        {"c=1": "none", "c=2": "none", "c=4": "none"},
        quick={"duration": 2.5},
    ),
    Scenario(
        "closed_slots_thinking",
        "closed_slots' server; conversations of 4 turns "
        "with 0.5 s think time (bench --sessions --think-time)",
        _srv(slots=4),
        {
            **_CLOSED,
            "concurrency": [1, 2, 4, 8, 16, 32],
            "sessions": 400,
            "turns": "fixed:4",
            "think_time": "0.5s",
            "duration": 5.0,
        },
        "slots",
        {"c=1": "none", "c=2": "none", "c=4": "none", "c=8": "none"},
        quick={"duration": 3.0},
    ),
    Scenario(
        "mixed_prompts",
        "8 slots, prefill 0.1 ms per prompt token; prompts uniform 16..1024 tokens; closed loop",
        _srv(slots=8, prefill_per_token=1e-4),
        {
            **_CLOSED,
            "input_tokens": "uniform:16:1024",
            "concurrency": [1, 2, 4, 8],
            "duration": 5.0,
        },
        "none",
        quick={"duration": 3.0},
    ),
    Scenario(
        "mixed_prompts_fixed",
        "mixed_prompts' server with fixed 520-token prompts",
        _srv(slots=8, prefill_per_token=1e-4),
        {**_CLOSED, "input_tokens": "fixed:520", "concurrency": [1, 2, 4, 8], "duration": 5.0},
        "none",
        quick={"duration": 3.0},
    ),
    Scenario(
        "batched_prefill",
        "8 slots, prompts prefilled together in one step (as vLLM and llama.cpp do), "
        "1 ms per prompt token: 100-token prompts cap throughput at 10 req/s; closed loop",
        _srv(slots=8, ttft=0.02, itl=0.01, prefill_per_token=1e-3, batch_prefill=True),
        {**_CLOSED, "input_tokens": "fixed:100", "concurrency": [1, 2, 4, 8]},
        "compute",
        {"c=1": "none", "c=2": "none"},
        quick={"duration": 3.0},
    ),
    Scenario(
        "compute_free_slots",
        "16 slots, compute knee 2; closed loop",
        _srv(slots=16, compute_knee=2),
        {**_CLOSED, "concurrency": _SLOTS_SWEEP},
        "compute",
        {"c=1": "none", "c=2": "none"},
        quick={"duration": 2.5},
    ),
    Scenario(
        "kv_bound",
        "16 slots, KV capacity 700 tokens: 4 requests of 128 + 32 fit",
        _srv(slots=16, kv_capacity=700),
        {**_CLOSED, "input_tokens": "fixed:128", "concurrency": _SLOTS_SWEEP},
        "kv",
        {"c=1": "none", "c=2": "none", "c=4": "none"},
        quick={"duration": 2.5},
    ),
    Scenario(
        "client_limited",
        "unlimited, instant server offered more than one load generator worker can send",
        _srv(ttft=0.0, itl=0.0, tokens=1),
        {
            "rate": [400.0, 1500.0],
            "arrival": "constant",
            "input_tokens": "fixed:8",
            "max_tokens": 1,
            "duration": 3.0,
        },
        "client",
        {"r=400": "none"},
        quick={"duration": 2.0},
    ),
    Scenario(
        "errors",
        "8 slots, 10% random 503 (no Retry-After); open loop",
        _srv(slots=8, error_rate=0.1, error_seed=7),
        {**_OPEN, "rate": [5.0, 10.0], "max_tokens": 32},
        "upstream",
        quick={"duration": 5.0},
    ),
    Scenario(
        "bursty_trace",
        "8 slots; a replayed trace of 16-request bursts every 3 s",
        _srv(slots=8),
        {"trace_format": "csv"},
        "slots",
        trace=bursty_trace_rows(),
    ),
    *(_slots_n(n) for n in (2, 4, 8)),
    Scenario(
        "slots_8_flat",
        "closed_slots' server with 8 slots: nothing new binds between 4 and 8 running",
        _srv(slots=8),
        {**_CLOSED, "concurrency": _SLOTS_SWEEP},
        "slots",
        {f"c={c}": "none" for c in _SLOTS_SWEEP if c <= 8},
        quick={"duration": 2.5},
    ),
    *(_engine(p) for p in (1, 2, 4, 8)),
)


def scenario(name: str) -> Scenario:
    """The scenario of that name (KeyError naming the known ones otherwise)."""
    for s in SCENARIOS:
        if s.name == name:
            return s
    raise KeyError(f"no scenario {name!r}; known: {', '.join(s.name for s in SCENARIOS)}")
