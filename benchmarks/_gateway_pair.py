"""Two upstreams for one model behind one gateway, for `gateway_failover.py`,
`gateway_weights.py` and `gateway_soak.py`: upstream ``a`` answers a share of requests
with 503 (no Retry-After), ``b`` is healthy, both take about 20 ms (FakeOpenAI in its
own process).

The gateway is `infersight gateway` as deployed (its own process, access log on, to a
file), from this checkout or from another revision's ``src`` (side by side).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import urllib.request
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field

import aiohttp
import numpy as np
import orjson

from _gateway_load import CHAT, PAYLOAD
from _gateway_targets import Target, gateway_process
from infersight.telemetry.promtext import Series, parse_metrics
from infersight_testkit.fake.openai import FakeConfig, FakeOpenAI
from infersight_testkit.fake.process import FakeProcess

__all__ = [
    "Pair",
    "Tally",
    "fake",
    "fake_pair",
    "gateway_for",
    "metric",
    "metrics",
    "p50_ms",
    "p99_ms",
    "paced",
    "statuses",
]

#: Each answer takes ttft = 20 ms (16 tokens, non-streamed: sent at once after it).
SERVICE_S = 0.020
_UP = "models=fake,concurrency=4096,queue=8192"
_BODY = orjson.dumps({**PAYLOAD, "stream": False})
_JSON = {"Content-Type": "application/json"}


@dataclass
class Pair:
    a: FakeProcess
    b: FakeProcess


def fake(error_rate: float = 0.0) -> contextlib.AbstractContextManager[FakeProcess]:
    """One fake upstream (its own process) failing ``error_rate`` of requests with 503."""
    return FakeOpenAI.subprocess(FakeConfig(ttft=SERVICE_S, tokens=16, error_rate=error_rate))


@contextlib.contextmanager
def fake_pair(error_rate: float) -> Iterator[Pair]:
    """``a`` failing ``error_rate`` of its requests with 503, ``b`` healthy."""
    with fake(error_rate) as a, fake() as b:
        yield Pair(a, b)


@contextlib.contextmanager
def gateway_for(
    a: FakeProcess, b: FakeProcess, name: str = "infersight", src: str | None = None
) -> Iterator[Target]:
    """A gateway with upstreams ``a`` (named "up") and ``b`` (default retry policy)."""
    # gateway_process names its first upstream "up": that one is a.
    with gateway_process(
        name, a.base_url, src=src, args=["--upstream", f"b={b.base_url},{_UP}"]
    ) as gw:
        yield gw


def metrics(t: Target) -> list[Series]:
    """The gateway's metric samples, scraped now."""
    with urllib.request.urlopen(t.url + "/metrics", timeout=10) as r:
        series, _ = parse_metrics(r.read().decode())
    return series


def metric(t: Target | list[Series], name: str, **labels: str) -> float:
    """The sum of the gateway's samples of ``name`` whose labels include ``labels``
    (0 when it has none: a revision that does not export it); ``t`` is the gateway
    (scraped now) or samples already scraped."""
    series = metrics(t) if isinstance(t, Target) else t
    return sum(
        s.value
        for s in series
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
    )


def statuses(fake: FakeProcess, status: str) -> int:
    """How many answers of ``status`` the fake sent since its last reset."""
    return int(fake.stats()["statuses"].get(status, 0))


@dataclass
class Tally:
    """What came back of the requests sent: statuses, failures to answer, latencies."""

    sent: int = 0
    statuses: dict[int, int] = field(default_factory=dict)
    #: Requests that got no HTTP answer at all (connection errors): lost.
    lost: int = 0
    #: The lost requests by exception class (ServerDisconnectedError...).
    why: dict[str, int] = field(default_factory=dict)
    lat: list[float] = field(default_factory=list)
    #: How far (s) the sender fell behind its schedule at worst: a load generator
    #: starved of CPU sends late, and the open loop is no longer what was asked.
    behind_s: float = 0.0

    def answered(self) -> int:
        return sum(self.statuses.values())

    def count(self, lo: int, hi: int) -> int:
        return sum(n for s, n in self.statuses.items() if lo <= s < hi)


async def paced(
    session: aiohttp.ClientSession,
    url: str,
    rate: float,
    seconds: float,
    tally: Tally,
    tick: Callable[[float], Awaitable[None]] | None = None,
) -> None:
    """Open loop: one non-streamed chat request every 1/rate s for ``seconds``, whatever
    the answers; ``tick(elapsed)`` is awaited in its own task about once a second."""
    loop = asyncio.get_running_loop()
    start = loop.time() + 0.01
    pending: set[asyncio.Task[None]] = set()
    next_tick = 1.0

    async def one() -> None:
        t0 = time.perf_counter()
        try:
            async with session.post(url + CHAT, data=_BODY, headers=_JSON) as r:
                await r.read()
                tally.statuses[r.status] = tally.statuses.get(r.status, 0) + 1
            if r.status == 200:
                tally.lat.append(time.perf_counter() - t0)
        except (aiohttp.ClientError, OSError) as e:
            tally.lost += 1
            tally.why[type(e).__name__] = tally.why.get(type(e).__name__, 0) + 1

    for i in range(int(rate * seconds)):
        at = i / rate
        delay = start + at - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        elif -delay > tally.behind_s:
            tally.behind_s = -delay
        if tick is not None and at >= next_tick:
            _spawn(pending, tick(at))
            next_tick += 1.0
        tally.sent += 1
        _spawn(pending, one())
    await asyncio.gather(*pending)


def _spawn(pending: set[asyncio.Task[None]], coro: Awaitable[None]) -> None:
    task: asyncio.Task[None] = asyncio.ensure_future(coro)
    pending.add(task)
    task.add_done_callback(pending.discard)


def p99_ms(lat: list[float]) -> float:
    return float(np.percentile(np.asarray(lat), 99)) * 1000.0 if lat else float("nan")


def p50_ms(lat: list[float]) -> float:
    return float(np.percentile(np.asarray(lat), 50)) * 1000.0 if lat else float("nan")
