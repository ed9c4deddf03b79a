"""A simulated FIFO server with N slots and a service time: the records a client would
keep, and the truth behind them.

Used to check windows and sustainability against a ground truth: every record's true
queue wait is known, and so is the server's capacity (slots / service time).
"""

from __future__ import annotations

import heapq
import random
from dataclasses import dataclass

from infersight.core.records import RequestRecord

__all__ = ["SimRun", "simulate"]


@dataclass
class SimRun:
    records: list[RequestRecord]
    #: Per record (same order): the true wait for a slot, seconds.
    waits: list[float]
    capacity: float


def simulate(
    *,
    slots: int,
    service: float,
    rate: float,
    duration: float,
    poisson: bool = False,
    jitter: float = 0.0,
    lag: float = 0.0005,
    seed: int = 0,
    tokens: int = 4,
) -> SimRun:
    """Open-loop arrivals at ``rate`` for ``duration`` s into ``slots`` FIFO slots.

    Each request holds a slot for ``service`` s (times ``1 ± jitter``, uniform); its
    first token comes at a quarter of its service, the rest evenly after.
    """
    rng = random.Random(seed)
    t, sends = 0.0, []
    while t < duration:
        sends.append(t)
        t += rng.expovariate(rate) if poisson else 1.0 / rate
    free = [0.0] * slots  # when each slot is next free (a heap)
    recs, waits = [], []
    for i, s in enumerate(sends):
        arrive = s + lag
        start = max(arrive, heapq.heappop(free))
        svc = service * (1 + rng.uniform(-jitter, jitter))
        end = start + svc
        heapq.heappush(free, end)
        first = start + svc / 4
        step = (end - first) / max(tokens - 1, 1)
        recs.append(
            RequestRecord(
                request_id=f"q{i:06d}",
                scheduled=s,
                sent=arrive,
                headers=first,
                chunk_times=[first + k * step for k in range(tokens)],
                chunk_tokens=[1] * tokens,
                end=end,
                status=200,
                ok=True,
                completion_tokens=tokens,
                prompt_tokens=8,
            )
        )
        waits.append(start - arrive)
    return SimRun(recs, waits, slots / service)
