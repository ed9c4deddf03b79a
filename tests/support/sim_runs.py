"""RunResults of simulated servers with a known truth (``queue_sim``), shaped as bench
writes them: one level per concurrency or rate, each with its aggregate.

``sweep_run`` is a closed-loop sweep (c=1, 2, 4, ... clients) of a server with a slot
limit and, optionally, a compute knee; ``rate_run`` one open-loop level at a rate,
with some requests answered by a fast 503 if asked. ``metrics=True`` adds the running
and waiting counts a vLLM-shaped /metrics would have shown.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from infersight.core.records import RunResult
from infersight.stats.aggregate import Window, aggregate
from support.queue_sim import engine_samples, simulate, simulate_closed

__all__ = ["rate_run", "sweep_run"]


def sweep_run(
    *,
    slots: int,
    knee: int | None = None,
    levels: Sequence[int] = (1, 2, 4, 8, 16),
    service: float = 0.24,
    duration: float = 3.0,
    metrics: bool = False,
    config: dict[str, Any] | None = None,
) -> RunResult:
    """Closed-loop levels one after the other (each ``duration`` s of sends)."""
    recs, samples, aggs, t = [], [], {}, 0.0
    for c in levels:
        sim = simulate_closed(
            slots=slots,
            service=service,
            clients=c,
            duration=duration,
            knee=knee,
            level=f"c={c}",
            start=t,
        )
        recs += sim.records
        if metrics:
            samples += engine_samples(sim)
        aggs[f"c={c}"] = aggregate(sim.records, target_concurrency=c)
        t = max(r.end or 0.0 for r in sim.records) + 0.5
    levels_cfg = [{"name": f"c={c}", "concurrency": c} for c in levels]
    return RunResult(
        records=recs,
        samples=samples,
        aggregates=aggs,
        config={"levels": levels_cfg, **(config or {})},
    )


def rate_run(
    rate: float,
    *,
    slots: int = 4,
    service: float = 0.24,
    duration: float = 8.0,
    metrics: bool = True,
    errors: float = 0.0,
    seed: int = 1,
) -> RunResult:
    """One open-loop level ``r`` at ``rate`` req/s; a fraction ``errors`` of the
    requests, chosen at random, is answered at once with a 503."""
    sim = simulate(slots=slots, service=service, rate=rate, duration=duration)
    rng = random.Random(seed)
    for r in sim.records:
        r.labels["level"] = "r"
        if rng.random() < errors:
            r.ok, r.error, r.status, r.error_message = False, "Overloaded", 503, "HTTP 503"
            r.chunk_times, r.chunk_tokens, r.completion_tokens = [], [], None
            r.end = (r.sent or r.scheduled) + 0.002
    agg = aggregate(sim.records, window=Window("auto"), target_rate=rate)
    return RunResult(
        records=sim.records,
        samples=engine_samples(sim) if metrics else [],
        aggregates={"r": agg},
        config={"levels": [{"name": "r", "rate": rate}]},
    )
