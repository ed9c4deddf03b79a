"""What does driving one schedule from Ray workers cost, against local processes?

On a real two-node Ray cluster started here (``ray start --head`` plus a node joined
with ``ray start --address``, 1 CPU each, on loopback) and the fake OpenAI server in
its own process (TTFT 50 ms, 10 ms per token), the same open-loop schedule (same rate,
count and seed) runs three ways, side by side in one run:

1. one load-generator process;
2. ``--workers 2``: two local processes;
3. ``--ray ADDRESS --workers 2``: two Ray actors, one per node.

For each: schedule lag p50/p99, TTFT p50/p99 (the server's TTFT is 50 ms: what is
above it is client and scheduling noise), load-generator CPU per request (with workers,
the workers' own: the driver only polls them), and the run's
wall time beyond the level's own (start-up: processes, or joining the cluster and
placing the actors). For the Ray run, each worker's clock offset and its uncertainty.
Ratios are against the single process of the same run.

    python benchmarks/ray_loadgen.py [--quick]

Needs the ray extra (``pip install 'infersight[ray]'``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from infersight.bench import BenchConfig, run
from infersight.core.listen import free_port
from infersight.core.records import RunResult
from infersight_testkit.fake.openai import FakeConfig, FakeOpenAI
from infersight_testkit.ray_cluster import LocalRayCluster


def ray_cli() -> str:
    found = shutil.which("ray") or str(Path(sys.executable).parent / "ray")
    if not os.access(found, os.X_OK):
        sys.exit("ray_loadgen: the ray program is missing: pip install 'infersight[ray]'")
    return found


def one(url: str, rate: float, requests: int, **kw: Any) -> tuple[RunResult, float]:
    cfg = BenchConfig(
        url=url,
        rate=[rate],
        arrival="poisson",
        requests=requests,
        seed=3,
        max_tokens=20,
        input_tokens="fixed:16",
        warmup="0",
        cooldown="0",
        diagnose=False,
        progress=False,
        **kw,
    )
    t = time.monotonic()
    result = run(cfg)
    return result, time.monotonic() - t


def row(name: str, result: RunResult, wall: float) -> dict[str, Any]:
    (agg,) = result.aggregates.values()
    (level,) = result.config["levels"]
    n = agg["requests"]["total"]
    return {
        "mode": name,
        "ok": f"{agg['requests']['ok']}/{n}",
        "lag_p50_ms": agg["schedule_lag"]["p50"] * 1e3,
        "lag_p99_ms": agg["schedule_lag"]["p99"] * 1e3,
        "ttft_p50_ms": agg["ttft"]["p50"] * 1e3,
        "ttft_p99_ms": agg["ttft"]["p99"] * 1e3,
        "cpu_ms_per_req": level["loadgen_cpu_s"] * 1e3 / max(n, 1),
        "startup_s": wall - level["wall_s"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer requests (about a minute)")
    args = ap.parse_args()
    rate, requests = (10.0, 60) if args.quick else (20.0, 400)
    rows, clocks = [], []
    with (
        FakeOpenAI.subprocess(FakeConfig(ttft=0.05, itl=0.01, tokens=20)) as srv,
        LocalRayCluster(ray_cli(), free_port()) as cluster,
    ):
        for name, kw in (
            ("1 process", {}),
            ("2 processes", {"workers": 2}),
            ("2 Ray actors", {"workers": 2, "ray": cluster.address}),
        ):
            result, wall = one(srv.base_url, rate, requests, **kw)
            rows.append(row(name, result, wall))
            for w in (result.environment.get("ray") or {}).get("workers", []):
                clocks += [(w["worker"], w["ip"], c) for c in w["clock"]]
    cols = list(rows[0])
    print(f"open loop, Poisson {rate:g}/s, {requests} requests, seed 3; server TTFT 50 ms")
    print("  ".join(f"{c:>14}" for c in cols))
    for r in rows:
        print("  ".join(f"{v:>14.2f}" if isinstance(v, float) else f"{v:>14}" for v in r.values()))
    base = rows[0]
    print("\nratios against one process (same run):")
    for r in rows[1:]:
        print(
            f"  {r['mode']}: lag p99 x{r['lag_p99_ms'] / base['lag_p99_ms']:.2f}, "
            f"TTFT p50 {r['ttft_p50_ms'] - base['ttft_p50_ms']:+.2f} ms, "
            f"CPU/request x{r['cpu_ms_per_req'] / base['cpu_ms_per_req']:.2f}, "
            f"start-up {r['startup_s'] - base['startup_s']:+.2f} s"
        )
    print("\nRay workers' clocks against the driver's (true offset 0: one host):")
    for worker, ip, c in clocks:
        print(
            f"  worker {worker} ({ip}): offset {c['offset_s'] * 1e6:+.0f} us "
            f"± {c['uncertainty_s'] * 1e6:.0f} us (best of {c['probes']} round trips, "
            f"rtt {c['rtt_s'] * 1e3:.2f} ms)"
        )


if __name__ == "__main__":
    main()
