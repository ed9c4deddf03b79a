"""A closed loop against a simulated FIFO engine with an HTTP front, and its engine
scrapes at chosen instants: the diagnosis tests that set the client's in-flight count
against an engine's gauges build their runs here."""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np
from diag_fixtures import make_run

from infersight.core.records import RequestRecord, RunResult, Sample
from infersight.diagnose.context import resolve_context
from infersight.diagnose.signals import RecordArrays, SampleIndex, window_stats
from infersight.diagnose.signals_engine import EngineSignals, engine_signals

__all__ = ["T0", "Req", "build", "signals", "simulate"]

T0 = 1000.0


@dataclass
class Req:
    sent: float
    arrival: float  # when the engine's scheduler sees it (after its HTTP front)
    start: float  # when it gets a slot
    end: float


def simulate(
    users: int, slots: int, front: list[float], service: float, duration: float
) -> list[Req]:
    """A closed loop of ``users`` against a FIFO engine with ``slots`` slots. Request k
    of a user spends ``front[k % len(front)]`` in the engine's HTTP front (reading and
    tokenizing, counted by no engine metric), then waits for a slot, then runs
    ``service`` seconds; the user sends again as soon as it ends."""
    free = [T0] * slots
    todo: list[tuple[float, int, float, int]] = []
    for u in range(users):
        sent = T0 + 0.001 * u
        heapq.heappush(todo, (sent + front[0], u, sent, 0))
    out: list[Req] = []
    while todo:
        arrival, u, sent, k = heapq.heappop(todo)
        start = max(arrival, heapq.heappop(free))
        end = start + service
        heapq.heappush(free, end)
        out.append(Req(sent, arrival, start, end))
        if end < T0 + duration:
            heapq.heappush(todo, (end + front[(k + 1) % len(front)], u, end, k + 1))
    return out


def build(
    reqs: list[Req],
    scrapes: list[float],
    *,
    slots: int,
    users: int,
    hide_waiting: bool = False,
    prefill: float = 0.03,
    engine: str = "llamacpp",
) -> RunResult:
    """A RunResult: the simulated requests as records and one engine scrape at each of
    ``scrapes``, shaped like llama.cpp's (running, deferred, /props slots) or vLLM's
    (running, waiting, KV usage, no slot limit)."""
    run = make_run(running=min(users, slots), waiting=0, concurrency=users, util=0.5, sm=0.3)
    records = []
    for i, q in enumerate(reqs):
        r = RequestRecord(request_id=f"r{i}", scheduled=q.sent, labels={"level": f"c={users}"})
        r.sent, r.attempts = q.sent, 1
        first = q.start + prefill
        r.chunk_times = [first, (first + q.end) / 2, q.end]
        r.chunk_tokens = [1, 1, 1]
        r.end = q.end + 0.0005
        r.status, r.ok, r.finish_reason = 200, True, "length"
        r.prompt_tokens, r.completion_tokens = 16, 3
        records.append(r)
    lab = {"engine": engine, "source": "http://127.0.0.1:8080/metrics"}
    samples = [s for s in run.samples if not s.name.startswith("engine.")]
    for t in scrapes:
        running = sum(q.start <= t < q.end for q in reqs)
        waiting = 0 if hide_waiting else sum(q.arrival <= t < q.start for q in reqs)
        samples += [
            Sample(t, "engine.requests_running", float(running), lab),
            Sample(t, "engine.requests_waiting", float(waiting), lab),
            Sample(t, "engine.scrape_duration_seconds", 0.002, lab),
        ]
        samples.append(
            Sample(t, "engine.slots", float(slots), lab)
            if engine == "llamacpp"
            else Sample(t, "engine.kv_cache_usage", 0.1, lab)
        )
    run.records, run.samples = records, samples
    run.config["engine"] = {"url": "http://127.0.0.1:8080", "engine": engine}
    return run


def signals(run: RunResult, t0: float, t1: float) -> EngineSignals:
    """The engine symbols of the window ``[t0, t1]`` (requests scheduled in it)."""
    ra, sidx = RecordArrays.build(run.records), SampleIndex(run.samples)
    idx = np.flatnonzero((ra.scheduled >= t0) & (ra.scheduled <= t1))
    return engine_signals(sidx, window_stats(ra, t0, t1, idx), resolve_context(run, sidx))
