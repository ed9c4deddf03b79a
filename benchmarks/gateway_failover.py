"""What does failover cost a client when one of two upstreams fails 5% of its requests?

Upstream ``a`` answers 5% of requests with 503 (no Retry-After), ``b`` is healthy;
both take about 20 ms (FakeOpenAI, each in its own process). Open-loop non-streamed
requests at fixed rates (40 and 300 req/s by default), side by side in one run, in
alternating blocks (ABBA order, so drift on a shared machine hits all alike):

- ``direct``: straight to the healthy ``b`` (the floor);
- ``gateway``: `infersight gateway` (its own process, access log on) in front of
  ``a`` and ``b``;
- ``gw-healthy`` (``--no-healthy`` leaves it out): a gateway in front of ``b`` and a
  second healthy upstream: what the gateway costs with no failure at all.

Goals (issue 31): p99(gateway) - p99(direct) <= +10 ms; no answer other than 200 and
no lost request (no HTTP answer at all) through the gateway; every 503 that ``a`` sent
is one failover, ``failover_pairs_total{from_upstream="up"}`` (the gateway names its
first upstream "up") equals the count of 503s in ``a``'s own statistics.

    python benchmarks/gateway_failover.py                       # ~4 min
    python benchmarks/gateway_failover.py --seconds 4 --rates 40 --no-healthy
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import os
import sys

import aiohttp

from _gateway_load import Meter
from _gateway_pair import Tally, fake, gateway_for, metric, p50_ms, p99_ms, paced, statuses
from _gateway_targets import Target

#: The goal: what the gateway may add to the p99 of the direct path, in ms.
ADDED_P99_MS = 10.0
ERROR_RATE = 0.05
PAIRS = "infersight_gateway_failover_pairs_total"


async def compare(
    targets: list[Target], rate: float, seconds: float, blocks: int
) -> dict[str, Tally]:
    """Each target at ``rate`` for ``seconds`` in all, in ``blocks`` alternating blocks."""
    res = {t.name: Tally() for t in targets}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        for t in targets:  # warm the connection pools
            await paced(session, t.url, rate, 0.5, Tally())
        for b in range(blocks):
            for t in targets if b % 2 == 0 else targets[::-1]:
                await paced(session, t.url, rate, seconds / blocks, res[t.name])
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--rates", default="40,300", help="req/s, comma-separated")
    ap.add_argument("--seconds", type=float, default=30.0, help="seconds per rate and target")
    ap.add_argument("--blocks", type=int, default=4, help="alternating blocks per rate")
    ap.add_argument(
        "--no-healthy",
        action="store_true",
        help="leave out the gateway in front of two healthy upstreams",
    )
    args = ap.parse_args()
    if isinstance(sys.stdout, io.TextIOWrapper):
        sys.stdout.reconfigure(line_buffering=True)
    rates = [float(r) for r in args.rates.split(",")]
    with contextlib.suppress(ImportError):
        import uvloop

        uvloop.install()
    with contextlib.ExitStack() as stack:
        a = stack.enter_context(fake(ERROR_RATE))
        b = stack.enter_context(fake())
        direct = Target("direct", b.base_url, b.pid)
        gw = stack.enter_context(gateway_for(a, b, "gateway"))
        targets = [direct, gw]
        if not args.no_healthy:
            c = stack.enter_context(fake())
            targets.append(stack.enter_context(gateway_for(c, b, "gw-healthy")))
        print(
            f"upstreams: a fails {ERROR_RATE:.0%} with 503 (no Retry-After), b healthy, "
            f"both ~20 ms; {os.cpu_count()} CPUs; {args.seconds:g} s per rate and target "
            f"in {args.blocks} alternating blocks; non-streamed\n"
        )
        hdr = (
            f"{'rate':>6}  {'target':<11}{'p50 ms':>9}{'p99 ms':>9}{'+p99':>9}"
            f"{'non-200':>9}{'lost':>6}{'n':>8}{'a 503s':>8}{'pairs':>7}"
        )
        print(hdr)
        print("-" * len(hdr))
        verdict: list[tuple[str, bool]] = []
        for rate in rates:
            m = Meter()
            a.reset()
            pairs0 = metric(gw, PAIRS, from_upstream="up")
            res = asyncio.run(compare(targets, rate, args.seconds, args.blocks))
            sent_503 = statuses(a, "503")
            pairs = int(metric(gw, PAIRS, from_upstream="up") - pairs0)
            base = p99_ms(res["direct"].lat)
            for t in targets:
                s = res[t.name]
                added = f"{p99_ms(s.lat) - base:>+9.2f}" if t is not direct else " " * 9
                extra = f"{sent_503:>8}{pairs:>7}" if t is gw else ""
                print(
                    f"{rate:>6.0f}  {t.name:<11}{p50_ms(s.lat):>9.2f}{p99_ms(s.lat):>9.2f}"
                    f"{added}{s.sent - s.count(200, 201) - s.lost:>9}{s.lost:>6}"
                    f"{s.sent:>8}{extra}"
                )
            for t in targets:
                s = res[t.name]
                if s.lost or s.sent - s.count(200, 201) - s.lost:
                    print(
                        f"{'':<8}{t.name}: statuses {dict(sorted(s.statuses.items()))}, "
                        f"lost by error {s.why}"
                    )
            g = res["gateway"]
            behind = max(res[t.name].behind_s for t in targets) * 1000
            print(
                f"{'':<8}(load avg {os.getloadavg()[0]:.1f}, other processes "
                f"{m.others_pct():.0f}% of the machine; sender behind schedule at worst "
                f"{behind:.0f} ms)"
            )
            verdict += [
                (
                    f"{rate:.0f}/s: p99 added <= +{ADDED_P99_MS:g} ms",
                    p99_ms(g.lat) - base <= ADDED_P99_MS,
                ),
                (f"{rate:.0f}/s: every answer 200", g.sent - g.count(200, 201) == 0),
                (f"{rate:.0f}/s: no lost request", g.lost == 0),
                (
                    f"{rate:.0f}/s: failover pairs == a's 503s ({pairs} / {sent_503})",
                    pairs == sent_503,
                ),
            ]
    print("\ngoals (the gateway in front of a and b):")
    for what, ok in verdict:
        print(f"  {what:<52}{'ok' if ok else 'MISS'}")
    print(
        "note: on a shared machine absolute figures inflate with the others' load shown "
        "beside each; the side-by-side ones hold."
    )


if __name__ == "__main__":
    main()
