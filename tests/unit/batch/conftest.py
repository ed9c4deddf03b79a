"""A discrete-event simulation of a server, to drive the concurrency controllers."""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from infersight.control.controller import ConcurrencyController


@dataclass
class SimResult:
    rows: int
    attempts: int
    rejected: int
    end: float
    latencies: list[float] = field(default_factory=list)
    #: (time, latency) of successful rows
    done_at: list[tuple[float, float]] = field(default_factory=list)


def simulate(
    ctrl: ConcurrencyController,
    *,
    rows: int,
    slots: int,
    service: float,
    reject_above: int | None = None,
    retry_after: float = 1.0,
    jitter: float = 0.1,
    seed: int = 0,
    alpha: float = 0.0,
) -> SimResult:
    """Slots serve requests in parallel (``service`` s each); more wait in a FIFO queue.

    With ``alpha`` > 0 a request's service time grows as ``busy ** alpha`` (a CPU
    engine batching its slots: throughput rises sublinearly with concurrency).
    With ``reject_above`` set, a request arriving while more than that many are in the
    server is answered 429 at once (with Retry-After), like a rate-limiting proxy.
    """
    rng = random.Random(seed)
    now = 0.0
    events: list[tuple[float, int, str, Any]] = []
    seq = 0
    pending = list(range(rows))
    retry: list[tuple[float, int]] = []
    inflight = 0
    in_server = 0
    queue: list[tuple[int, float]] = []  # (row, started)
    busy = 0
    res = SimResult(rows=rows, attempts=0, rejected=0, end=0.0)
    done = 0

    def push(t: float, kind: str, data: Any) -> None:
        nonlocal seq
        seq += 1
        heapq.heappush(events, (t, seq, kind, data))

    def start_service(row: int, started: float) -> None:
        nonlocal busy
        busy += 1
        t = service * busy**alpha * (1 + rng.uniform(-jitter, jitter))
        push(now + t, "done", (row, started))

    def fill() -> None:
        nonlocal inflight, in_server
        while inflight < ctrl.limit and now >= ctrl.pause_until:
            if retry and retry[0][0] <= now:
                row = heapq.heappop(retry)[1]
            elif pending:
                row = pending.pop()
            else:
                break
            inflight += 1
            res.attempts += 1
            ctrl.on_send(now)
            if reject_above is not None and in_server >= reject_above:
                push(now + 0.001, "reject", (row, now))
                continue
            in_server += 1
            if busy < slots:
                start_service(row, now)
            else:
                queue.append((row, now))
        if ctrl.pause_until > now:
            push(ctrl.pause_until, "wake", None)
        if retry and inflight < ctrl.limit:
            push(retry[0][0], "wake", None)

    fill()
    while done < rows and events:
        now, _, kind, data = heapq.heappop(events)
        if kind == "done":
            row, started = data
            busy -= 1
            in_server -= 1
            inflight -= 1
            done += 1
            res.latencies.append(now - started)
            res.done_at.append((now, now - started))
            ctrl.on_success(now, started=started, latency=now - started)
            if queue:
                start_service(*queue.pop(0))
        elif kind == "reject":
            row, started = data
            inflight -= 1
            res.rejected += 1
            ctrl.on_error(
                now, started=started, kind="RateLimited", congestion=True, retry_after=retry_after
            )
            heapq.heappush(retry, (now + retry_after, row))
        fill()
    res.end = now
    return res


@pytest.fixture
def sim() -> Callable[..., SimResult]:
    return simulate
