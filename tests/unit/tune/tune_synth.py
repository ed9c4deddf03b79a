"""A server whose best setting is known, as RunResults a tune session can score.

The runs come from the server model's own simulation (``servermodel.simulate``, the
records bench would have written, ``servermodel.evaluate.records_of``): S slots, every
step ``itl`` seconds up to the compute knee and ``running / knee`` times that past it,
the first token ``ttft`` scaled the same way. Closed loop with as many clients as slots
(and, for the baseline, 4 times as many: a queue), so throughput grows with slots up to
the knee and stays flat after it, while TPOT grows (docs/design.md section 5,
"compute"). Output lengths vary a little (the seed), which gives the slices their noise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from infersight.core.curve import Recommendation
from infersight.core.records import RunResult
from infersight.servermodel.evaluate import records_of
from infersight.servermodel.simulate import Engine, Load, simulate
from infersight.stats.aggregate import aggregate
from infersight.stats.windows import Window

TOKENS = 16


def server_run(
    slots: int,
    *,
    knee: int = 6,
    ttft: float = 0.05,
    itl: float = 0.01,
    seconds: float = 8.0,
    seed: int = 0,
    jitter: float = 0.1,
    slo: Mapping[str, float] | None = None,
    recommendation: Recommendation | None = None,
    clients: Sequence[int] | None = None,
) -> RunResult:
    """One trial at ``slots``: a level per entry of ``clients`` (default: ``slots``),
    one after another, starting at ``1000 * seed`` seconds (trials never overlap)."""
    rng = np.random.default_rng(seed + 1000 * slots)
    eng = Engine(
        slots=float(slots),
        kv=None,
        kv_reserve=True,
        a=itl,
        b=itl / knee,
        k=float(knee),
        c=0.0,
        e=0.0,
        kappa=ttft / itl,
        c_first=0.0,
    )
    spread = max(1, round(jitter * TOKENS))
    output = rng.integers(TOKENS - spread, TOKENS + spread + 1, 400).astype(float)
    prompt = np.full(output.size, 16.0)
    t0 = 100.0 + 1000.0 * seed
    records, aggs, levels = [], {}, []
    for c in clients or [slots]:
        sim = simulate(
            eng, Load(prompt=prompt, output=output, clients=c, count=10**6, duration=seconds)
        )
        name = f"c={c}"
        recs = records_of(sim, name)
        for r in recs:
            r.scheduled += t0
            r.sent = None if r.sent is None else r.sent + t0
            r.chunk_times = [x + t0 for x in r.chunk_times]
            r.end = None if r.end is None else r.end + t0
        t0 = max(r.end or 0.0 for r in recs) + 1.0
        aggs[name] = aggregate(
            recs, window=Window("auto"), target_concurrency=c, slo=dict(slo or {})
        )
        levels.append({"name": name, "concurrency": c})
        records += recs
    return RunResult(
        records=records, aggregates=aggs, recommendation=recommendation, config={"levels": levels}
    )
