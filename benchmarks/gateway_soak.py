"""Does the gateway hold its memory and lose nothing over minutes of failover traffic?

Upstream ``a`` answers 5% of requests with 503 (no Retry-After), ``b`` is healthy,
both ~20 ms (FakeOpenAI, each in its own process), behind `infersight gateway` in its
own process (access log on, to a file, as deployed). Open-loop non-streamed requests
at 300 req/s for 10 minutes by default. Every minute: the gateway process's RSS
(psutil), and that minute's requests, non-200 answers, lost requests (no HTTP answer)
and latency.

Goals (issue 31): RSS grows by at most 16 MiB after the first minute (from the end of
minute 1 to the end of the run); no lost request; no 5xx answer.

    python benchmarks/gateway_soak.py                      # 10 minutes
    python benchmarks/gateway_soak.py --minutes 2 --rate 100
    python benchmarks/gateway_soak.py --seconds 30 --interval 10   # a quick look
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import os
import sys

import aiohttp
import psutil

from _gateway_pair import Tally, fake_pair, gateway_for, metric, p50_ms, p99_ms, paced, statuses
from _gateway_targets import Target

#: The goal: RSS growth after the first interval (minute), in MiB.
GROWTH_MIB = 16.0
ERROR_RATE = 0.05
MIB = 1024 * 1024
#: A sender this far (s) behind its schedule no longer applies the load asked for.
BEHIND_S = 0.1


async def soak(
    gw: Target, rate: float, seconds: float, interval: float
) -> tuple[Tally, list[float]]:
    """``rate`` req/s for ``seconds``; every ``interval`` s print a row. Returns the
    tally and the gateway's RSS (MiB) at the end of each interval."""
    assert gw.pid is not None
    proc = psutil.Process(gw.pid)
    tally = Tally()
    rss: list[float] = []
    mark = {"sent": 0, "lat": 0}

    def row(label: float) -> None:
        mb = float(proc.memory_info().rss) / MIB
        rss.append(mb)
        lat = tally.lat[mark["lat"] :]
        ok, sent = tally.count(200, 201), tally.sent
        done = tally.answered() + tally.lost
        growth = f"{mb - rss[0]:>+9.1f}" if len(rss) > 1 else f"{'':>9}"
        print(
            f"{label:>7.0f}{mb:>9.1f}{growth}{sent - mark['sent']:>8}"
            f"{tally.answered() - ok:>9}{tally.count(500, 600):>6}{tally.lost:>6}"
            f"{sent - done:>9}{p50_ms(lat):>9.2f}{p99_ms(lat):>9.2f}"
            f"{proc.cpu_percent():>7.0f}%"
        )
        mark.update(sent=sent, lat=len(tally.lat))

    async def tick(at: float) -> None:
        if at > 0 and round(at) % round(interval) == 0:
            row(at)

    print(
        f"{'t s':>7}{'RSS MiB':>9}{'growth':>9}{'sent':>8}{'non-200':>9}{'5xx':>6}"
        f"{'lost':>6}{'pending':>9}{'p50 ms':>9}{'p99 ms':>9}{'gw cpu':>8}"
    )
    print(f"{0:>7}{float(proc.memory_info().rss) / MIB:>9.1f}  (before the load)")
    proc.cpu_percent()
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        await paced(session, gw.url, rate, seconds, tally, tick)
    row(seconds)  # the last requests' answers, and the RSS after them
    return tally, rss


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--seconds", type=float, help="run this long instead of --minutes")
    ap.add_argument("--interval", type=float, default=60.0, help="seconds between rows")
    ap.add_argument("--rate", type=float, default=300.0, help="req/s")
    ap.add_argument("--rates", help="alias of --rate (one value)")
    args = ap.parse_args()
    rate = float(args.rates.split(",")[0]) if args.rates else args.rate
    seconds = args.seconds or args.minutes * 60.0
    if isinstance(sys.stdout, io.TextIOWrapper):
        sys.stdout.reconfigure(line_buffering=True)
    with contextlib.suppress(ImportError):
        import uvloop

        uvloop.install()
    with fake_pair(ERROR_RATE) as pair, gateway_for(pair.a, pair.b) as gw:
        print(
            f"a fails {ERROR_RATE:.0%} with 503 (no Retry-After), b healthy, both ~20 ms; "
            f"{rate:g} req/s non-streamed for {seconds:g} s; gateway pid {gw.pid}; "
            f"{os.cpu_count()} CPUs; load avg {os.getloadavg()[0]:.1f}\n"
            "(per row: that interval's requests and latency; non-200, 5xx and lost are "
            "running totals; growth: since the end of the first interval)\n"
        )
        tally, rss = asyncio.run(soak(gw, rate, seconds, args.interval))
        sent_503 = statuses(pair.a, "503")
        pairs = int(metric(gw, "infersight_gateway_failover_pairs_total", from_upstream="up"))
    # rss[0] is the end of the first interval; the last entry is after the last answer.
    growth = rss[-1] - rss[0] if len(rss) > 1 else float("nan")
    peak = max(rss) - rss[0] if len(rss) > 1 else float("nan")
    non200 = tally.answered() - tally.count(200, 201)
    five = tally.count(500, 600)
    print(
        f"\nrequests {tally.sent}, answered 200 {tally.count(200, 201)}, non-200 {non200}, "
        f"5xx {five}, lost {tally.lost}; p50 {p50_ms(tally.lat):.2f} ms, "
        f"p99 {p99_ms(tally.lat):.2f} ms"
    )
    print(
        f"statuses {dict(sorted(tally.statuses.items()))}; lost by error {tally.why}; "
        f"the sender was {tally.behind_s * 1000:.0f} ms behind its schedule at worst"
    )
    print(f"a sent {sent_503} 503s; the gateway counted {pairs} failovers from it")
    print(
        f"RSS after the first interval {rss[0]:.1f} MiB, at the end {rss[-1]:.1f} MiB, "
        f"peak above the first interval {peak:+.1f} MiB"
    )
    print("\ngoals:")
    print(
        f"  RSS growth after the first interval: {growth:+.1f} MiB (<= {GROWTH_MIB:g})  "
        f"{'ok' if growth <= GROWTH_MIB else 'MISS'}"
    )
    print(f"  lost requests: {tally.lost}  {'ok' if tally.lost == 0 else 'MISS'}")
    print(f"  5xx answers: {five}  {'ok' if five == 0 else 'MISS'}")
    print(f"(load avg {os.getloadavg()[0]:.1f})")
    if tally.behind_s > BEHIND_S:
        print(
            f"warning: the sender fell {tally.behind_s:.1f} s behind its schedule: the "
            "machine could not run this load (the load generator starved of CPU), and "
            "the figures above describe that overload too"
        )


if __name__ == "__main__":
    main()
