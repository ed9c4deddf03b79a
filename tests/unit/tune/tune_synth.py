"""A server whose best setting is known, as RunResults a tune session can score.

Closed loop with as many requests in flight as slots: every step takes
``max(1, slots / knee)`` times longer past the compute knee, so throughput grows with
slots up to the knee and stays flat after it, while TPOT grows (docs/design.md
section 5, "compute"). A little lognormal jitter gives the slices their noise.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from infersight.core.aggregate import Window, aggregate
from infersight.core.curve import Recommendation
from infersight.core.records import RequestRecord, RunResult

TOKENS = 16


def server_run(
    slots: int,
    *,
    knee: int = 6,
    ttft: float = 0.05,
    itl: float = 0.01,
    seconds: float = 8.0,
    seed: int = 0,
    jitter: float = 0.03,
    slo: Mapping[str, float] | None = None,
    recommendation: Recommendation | None = None,
) -> RunResult:
    rng = np.random.default_rng(seed + 1000 * slots)
    pace = max(1.0, slots / knee)
    records: list[RequestRecord] = []
    name = f"c={slots}"
    for lane in range(slots):
        t = 100.0 + lane * 0.001
        k = 0
        while t < 100.0 + seconds:
            f = float(rng.lognormal(0.0, jitter))
            first = t + ttft * pace * f
            chunks = [first + i * itl * pace * f for i in range(TOKENS)]
            end = chunks[-1] + 1e-4
            records.append(RequestRecord(
                f"{lane}-{k}", scheduled=t, sent=t, headers=first, chunk_times=chunks,
                chunk_tokens=[1] * TOKENS, end=end, status=200, ok=True,
                completion_tokens=TOKENS, labels={"level": name},
            ))
            t, k = end, k + 1
    agg = aggregate(records, window=Window("auto"), target_concurrency=slots, slo=dict(slo or {}))
    return RunResult(records=records, aggregates={name: agg}, recommendation=recommendation,
                     config={"levels": [{"name": name, "concurrency": slots}]})
