"""A simulated FIFO server with N slots and a service time: the records a client would
keep, and the truth behind them.

Used to check windows, sustainability and the capacity curve against a ground truth:
every record's true queue wait is known, and so is the server's capacity (slots /
service time). ``simulate`` drives it with an open loop, ``simulate_closed`` with C
clients; a ``knee`` slows every request by running / knee once more than ``knee`` run
(a device whose compute saturates), and ``engine_samples`` gives the running and
waiting counts an engine's /metrics would have shown.
"""

from __future__ import annotations

import heapq
import random
from dataclasses import dataclass

from infersight.core.records import RequestRecord, Sample

__all__ = ["SimRun", "engine_samples", "simulate", "simulate_closed"]


@dataclass
class SimRun:
    records: list[RequestRecord]
    #: Per record (same order): the true wait for a slot, seconds.
    waits: list[float]
    capacity: float


def _record(
    i: int, sched: float, arrive: float, start: float, svc: float, tokens: int
) -> RequestRecord:
    end = start + svc
    first = start + svc / 4
    step = (end - first) / max(tokens - 1, 1)
    return RequestRecord(
        request_id=f"q{i:06d}",
        scheduled=sched,
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


def simulate_closed(
    *,
    slots: int,
    service: float,
    clients: int,
    duration: float,
    knee: int | None = None,
    tokens: int = 8,
    level: str | None = None,
    start: float = 0.0,
    lag: float = 0.0005,
) -> SimRun:
    """``clients`` that each send their next request when the last one ends, for
    ``duration`` s, into ``slots`` FIFO slots. With ``knee``, each request takes
    ``service x running / knee`` once more than ``knee`` run (the steady state of a
    closed loop: running = min(clients, slots))."""
    running = min(clients, slots)
    svc = service * max(1.0, running / knee) if knee else service
    free = [start] * slots
    ready = [(start + c * 1e-4, c) for c in range(clients)]
    heapq.heapify(ready)
    recs, waits = [], []
    i = 0
    while ready:
        t, c = heapq.heappop(ready)
        if t >= start + duration:
            continue
        arrive = t + lag
        begin = max(arrive, heapq.heappop(free))
        heapq.heappush(free, begin + svc)
        r = _record(i, t, arrive, begin, svc, tokens)
        if level is not None:
            r.labels["level"] = level
        recs.append(r)
        waits.append(begin - arrive)
        heapq.heappush(ready, (begin + svc, c))
        i += 1
    return SimRun(recs, waits, running / svc)


def engine_samples(run: SimRun, every: float = 0.25, engine: str = "vllm") -> list[Sample]:
    """Running and waiting counts at scrapes ``every`` s apart, from the simulated truth
    (running: in a slot; waiting: arrived, not yet in one)."""
    recs = run.records
    t0 = min(r.scheduled for r in recs)
    t1 = max(r.end or r.scheduled for r in recs)
    lab = {"engine": engine, "source": "http://127.0.0.1:1/metrics"}
    out: list[Sample] = []
    t = t0 + every / 2
    while t < t1:
        run_n = sum(
            1 for r, w in zip(recs, run.waits, strict=True) if (r.sent or 0) + w <= t < (r.end or 0)
        )
        wait_n = sum(
            1
            for r, w in zip(recs, run.waits, strict=True)
            if (r.sent or 0) <= t < (r.sent or 0) + w
        )
        out += [
            Sample(t, "engine.requests_running", float(run_n), lab),
            Sample(t, "engine.requests_waiting", float(wait_n), lab),
        ]
        t += every
    return out


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
        heapq.heappush(free, start + svc)
        recs.append(_record(i, s, arrive, start, svc, tokens))
        waits.append(start - arrive)
    return SimRun(recs, waits, slots / service)
