"""How fast do errors move traffic off an upstream, and back onto it once it recovers?

Two upstreams of one model (FakeOpenAI, ~20 ms each, each in its own process) behind
`infersight gateway` (its own process), open-loop non-streamed requests at a steady
rate (100 req/s by default). After a warm phase with both healthy, upstream ``a``
(the gateway's "up") starts answering half of its requests with 503; later it heals.
Every second the gateway's metrics are scraped: the share of *new* requests each
upstream received in that second (``upstream_calls_total`` less the failovers into it,
over all calls less all failovers) and the ``upstream_weight`` gauges.

Goals (issue 31): once ``a`` fails 50%, its share of new requests is below 20% within
10 s; once it heals, its share is back to 40% or more within 30 s; every request is
answered 200 throughout.

    python benchmarks/gateway_weights.py                  # ~75 s
    python benchmarks/gateway_weights.py --warm 4 --bad 10 --recover 20 --rate 60
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import itertools
import os
import sys
import time

import aiohttp

from _gateway_pair import Tally, fake_pair, gateway_for, metric, metrics, paced
from _gateway_targets import Target
from infersight.telemetry.promtext import Series
from infersight_testkit.fake.process import FakeProcess

#: Goals: seconds until a's share of new requests falls below LOW once it fails, and
#: until it is back to HIGH or more once it heals.
LOW, DOWN_S = 0.20, 10.0
HIGH, UP_S = 0.40, 30.0
CALLS = "infersight_gateway_upstream_calls_total"
PAIRS = "infersight_gateway_failover_pairs_total"
WEIGHT = "infersight_gateway_upstream_weight"


def shares(prev: list[Series], cur: list[Series]) -> tuple[float, float]:
    """(new requests, a's share of them) between two scrapes."""

    def d(name: str, **labels: str) -> float:
        return metric(cur, name, **labels) - metric(prev, name, **labels)

    new = d(CALLS) - d(PAIRS)
    a_first = d(CALLS, upstream="up") - d(PAIRS, to_upstream="up")
    return new, (a_first / new if new > 0 else float("nan"))


async def run(
    gw: Target,
    set_rate: dict[float, tuple[str, float]],
    rate: float,
    seconds: float,
    fail: FakeProcess,
) -> tuple[Tally, list[tuple[float, list[Series]]], dict[str, float]]:
    """Load ``gw`` at ``rate``; at each second in ``set_rate`` set a's error rate;
    scrape the gateway every second. Returns the tally, the scrapes (monotonic time,
    samples) and when each phase began."""
    tally = Tally()
    scrapes: list[tuple[float, list[Series]]] = [(time.monotonic(), metrics(gw))]
    began: dict[str, float] = {"warm": scrapes[0][0]}

    async def tick(at: float) -> None:
        if (ev := set_rate.get(round(at))) is not None:
            await asyncio.to_thread(fail.set_error_rate, ev[1])
            began[ev[0]] = time.monotonic()
        snap = await asyncio.to_thread(metrics, gw)
        scrapes.append((time.monotonic(), snap))

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        await paced(session, gw.url, rate, seconds, tally, tick)
    scrapes.sort(key=lambda s: s[0])
    return tally, scrapes, began


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--rate", type=float, default=100.0, help="req/s")
    ap.add_argument("--rates", help="alias of --rate (one value)")
    ap.add_argument("--warm", type=int, default=10, help="seconds with both healthy")
    ap.add_argument("--bad", type=int, default=20, help="seconds with a failing")
    ap.add_argument("--recover", type=int, default=40, help="seconds after a heals")
    ap.add_argument("--seconds", type=int, help="scale: --bad this, --recover twice this")
    ap.add_argument("--error-rate", type=float, default=0.5, help="a's share of 503s")
    args = ap.parse_args()
    if args.rates:
        args.rate = float(args.rates.split(",")[0])
    if args.seconds:
        args.bad, args.recover = args.seconds, 2 * args.seconds
    if isinstance(sys.stdout, io.TextIOWrapper):
        sys.stdout.reconfigure(line_buffering=True)
    with contextlib.suppress(ImportError):
        import uvloop

        uvloop.install()
    total = args.warm + args.bad + args.recover
    events = {
        float(args.warm): ("bad", args.error_rate),
        float(args.warm + args.bad): ("healed", 0.0),
    }
    with fake_pair(0.0) as pair, gateway_for(pair.a, pair.b) as gw:
        print(
            f"two upstreams ~20 ms, {args.rate:g} req/s non-streamed; a fails "
            f"{args.error_rate:.0%} with 503 from t={args.warm} s to t={args.warm + args.bad}"
            f" s; {os.cpu_count()} CPUs\n"
        )
        tally, scrapes, began = asyncio.run(run(gw, events, args.rate, total, pair.a))
    print(f"{'t s':>6}  {'phase':<7}{'new/s':>7}{'a share':>9}{'w(a)':>7}{'w(b)':>7}")
    down: float | None = None
    back: float | None = None
    for (t0, prev), (t1, cur) in itertools.pairwise(scrapes):
        new, share = shares(prev, cur)
        phase = (
            "healed"
            if t1 > began.get("healed", 1e18)
            else ("bad" if t1 > began.get("bad", 1e18) else "warm")
        )
        since = t1 - began.get(phase, began["warm"])
        print(
            f"{t1 - began['warm']:>6.1f}  {phase:<7}{new / (t1 - t0):>7.0f}{share:>8.0%} "
            f"{metric(cur, WEIGHT, upstream='up'):>7.2f}{metric(cur, WEIGHT, upstream='b'):>7.2f}"
        )
        if phase == "bad" and down is None and share < LOW:
            down = since
        if phase == "healed" and back is None and share >= HIGH:
            back = since
    non200 = tally.sent - tally.count(200, 201) - tally.lost
    print(f"\nrequests {tally.sent}, non-200 {non200}, lost {tally.lost}")
    print(
        "(the share is per interval between scrapes, about 1 s: "
        f"~{args.rate:g} requests, so it wanders by a few points)"
    )

    def secs(v: float | None) -> str:
        return f"{v:.1f} s" if v is not None else "never"

    print("\ngoals:")
    print(
        f"  a's share < {LOW:.0%} after it fails: {secs(down):>8}  (<= {DOWN_S:g} s)  "
        f"{'ok' if down is not None and down <= DOWN_S else 'MISS'}"
    )
    print(
        f"  a's share >= {HIGH:.0%} after it heals: {secs(back):>8}  (<= {UP_S:g} s)  "
        f"{'ok' if back is not None and back <= UP_S else 'MISS'}"
    )
    print(f"  every request answered 200: {'ok' if non200 + tally.lost == 0 else 'MISS'}")
    print(f"(load avg {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
