"""What do limits shared through Redis add to a request, next to local limits?

Side by side in one run, on 127.0.0.1 (a real redis-server started here, no
persistence; a fast fake upstream in its own process):

- admission alone: ``KeyStore.admit`` for a key with request and token limits, local
  buckets vs the Redis Lua script (one round trip, what every request of a limited key
  pays), in alternating blocks: latency and the CPU the caller spends per admission;
- end to end: sequential requests through ``infersight gateway`` processes with the
  same key and limits: one keeping them locally, one in Redis, and one in Redis as the
  baseline revision runs it (``--baseline REV``, default main: there, a key far from
  its limits kept a request taken ahead of need, a *spare*, on raw redis-py
  connections), alternating blocks: latency and each gateway's CPU per request; then
  the most req/s of each with 32 concurrent clients.

The goal is at most 0.3 ms added at p50 on loopback Redis, and no user-visible figure
(latency, req/s) more than 10% worse than the baseline's. Latency on a busy machine
includes waiting for a core (several processes take turns per request); the CPU figures
are what the shared limits cost whatever the load.

    python benchmarks/gateway_shared_limits.py --quick      # about a minute
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import aiohttp
import numpy as np
import orjson
import psutil
from prometheus_client import CollectorRegistry

from _baseline import baseline_src
from _gateway_targets import gateway_process
from infersight.gateway import hash_key
from infersight.gateway.auth import KeyStore
from infersight.gateway.config import KeyConfig
from infersight.gateway.shared import RedisLink, SharedConfig, SharedLimits, SharedMetrics
from infersight_testkit import FakeConfig, FakeOpenAI
from infersight_testkit.redis_server import RedisServer

KEY = "sk-bench-shared-limits"
LIMITS = {"requests_per_minute": 1e9, "tokens_per_minute": 1e12}
BODY = orjson.dumps(
    {"model": "fake", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8}
)


def pct(v: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(v), q)) * 1000.0 if v else float("nan")


# -- admission alone ----------------------------------------------------------------------
async def admission(
    redis_url: str, n: int, blocks: int
) -> tuple[dict[str, list[float]], dict[str, float]]:
    key = KeyConfig(name="bench", sha256=hash_key(KEY), **LIMITS)
    cfg = SharedConfig(redis_url=redis_url, timeout_ms=1000)
    link = RedisLink(cfg, SharedMetrics(CollectorRegistry()))
    assert await link.connect(), "redis did not answer"
    local, shared = KeyStore([key]), KeyStore([key], shared=SharedLimits(link, cfg))
    host, port = redis_url.split("//")[1].split("/")[0].split(":")
    reader, writer = await asyncio.open_connection(host, int(port))

    async def raw_ping() -> None:  # the floor: one loopback round trip, no client library
        writer.write(b"PING\r\n")
        await reader.readline()

    ops: dict[str, Callable[[], Awaitable[object]]] = {
        "local": lambda: local.admit("bench"),
        "redis": lambda: shared.admit("bench"),
        "raw PING": raw_ping,
        "redis-py PING": link.client.ping,
    }
    out: dict[str, list[float]] = {name: [] for name in ops}
    cpu = dict.fromkeys(ops, 0.0)
    try:
        for op in ops.values():  # warm: script load, connection
            for _ in range(50):
                await op()
        for _ in range(blocks):
            for name, op in ops.items():
                lat = out[name]
                c0 = time.process_time()
                for _ in range(n // blocks):
                    t0 = time.perf_counter()
                    await op()
                    lat.append(time.perf_counter() - t0)
                cpu[name] += time.process_time() - c0
    finally:
        writer.close()
        await link.close()
    return out, {name: cpu[name] / max(1, len(out[name])) for name in out}


# -- end to end ---------------------------------------------------------------------------
@contextlib.contextmanager
def gateway(
    upstream: str, redis_url: str | None, tmp: Path, name: str, src: Path | None = None
) -> Iterator[tuple[str, int]]:
    """`infersight gateway` in its own process with the bench key, limits kept locally
    or (``redis_url``) in Redis; ``src``: another revision's code."""
    cfg = tmp / f"{name}.toml"
    lines = [
        "[[keys]]",
        'name = "bench"',
        f'sha256 = "{hash_key(KEY)}"',
        *(f"{k} = {v!r}" for k, v in LIMITS.items()),
    ]
    if redis_url:
        lines += ["[shared]", f'redis_url = "{redis_url}"']
    cfg.write_text("\n".join(lines) + "\n")
    with gateway_process(
        name, upstream, args=["-c", str(cfg)], src=str(src) if src else None
    ) as target:
        assert target.pid is not None
        yield target.url, target.pid


async def one(session: aiohttp.ClientSession, url: str) -> float | None:
    t0 = time.perf_counter()
    async with session.post(
        url + "/v1/chat/completions",
        data=BODY,
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {KEY}"},
    ) as r:
        await r.read()
        ok = r.status == 200
    return time.perf_counter() - t0 if ok else None


async def sequential(
    targets: dict[str, tuple[str, int]], n: int, blocks: int
) -> tuple[dict[str, list[float]], dict[str, float]]:
    """Latencies per target and each gateway process's CPU seconds per request."""
    out: dict[str, list[float]] = {name: [] for name in targets}
    procs = {name: psutil.Process(pid) for name, (_, pid) in targets.items()}
    cpu = dict.fromkeys(targets, 0.0)
    errors = 0
    async with aiohttp.ClientSession() as session:
        for url, _ in targets.values():
            for _ in range(30):
                await one(session, url)
        for _ in range(blocks):
            for name, (url, _) in targets.items():
                t = procs[name].cpu_times()
                for _ in range(n // blocks):
                    lat = await one(session, url)
                    if lat is None:
                        errors += 1
                    else:
                        out[name].append(lat)
                t2 = procs[name].cpu_times()
                cpu[name] += (t2.user + t2.system) - (t.user + t.system)
    if errors:
        print(f"  note: {errors} requests failed")
    return out, {name: cpu[name] / max(1, len(out[name])) for name in out}


async def closed_loop(url: str, concurrency: int, seconds: float) -> float:
    done = 0
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        stop = time.perf_counter() + seconds

        async def worker() -> None:
            nonlocal done
            while time.perf_counter() < stop:
                if await one(session, url) is not None:
                    done += 1

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return done / (time.perf_counter() - t0)


def table(title: str, res: dict[str, list[float]], cpu: dict[str, float], cpu_of: str) -> float:
    print(f"\n{title}")
    print(
        f"  {'':<14}{'p50 ms':>10}{'p90 ms':>10}{'p99 ms':>10}"
        f"{'CPU µs/op (' + cpu_of + ')':>26}{'n':>8}"
    )
    for name, lat in res.items():
        print(
            f"  {name:<14}{pct(lat, 50):>10.3f}{pct(lat, 90):>10.3f}{pct(lat, 99):>10.3f}"
            f"{cpu[name] * 1e6:>26.1f}{len(lat):>8}"
        )
    added = pct(res["redis"], 50) - pct(res["local"], 50)
    print(
        f"  added by Redis: p50 {added:.3f} ms "
        f"({pct(res['redis'], 50) / pct(res['local'], 50):.2f}x"
        f" local), CPU {(cpu['redis'] - cpu['local']) * 1e6:.1f} µs per request"
    )
    for name in (n for n in res if n.startswith("redis@")):
        print(
            f"  {name}: p50 {pct(res[name], 50):.3f} ms; this/baseline p50 "
            f"{pct(res['redis'], 50) / pct(res[name], 50):.2f}, p99 "
            f"{pct(res['redis'], 99) / pct(res[name], 99):.2f}"
        )
    return added


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="short run (about a minute)")
    ap.add_argument("--baseline", default="main", help="git revision to run beside ('none': skip)")
    args = ap.parse_args()
    base = None if args.baseline == "none" else baseline_src(args.baseline)
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[attr-defined]
    n_admit = 4000 if args.quick else 40000
    n_e2e = 1000 if args.quick else 8000
    seconds = 3.0 if args.quick else 5.0
    rounds = 2 if args.quick else 5
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    import redis as redis_py

    print(
        f"{os.cpu_count()} CPUs, load avg {os.getloadavg()[0]:.1f}; redis-py "
        f"{redis_py.__version__}; redis-server and the fake upstream on 127.0.0.1"
    )
    with (
        RedisServer() as redis,
        tempfile.TemporaryDirectory() as tmp,
        FakeOpenAI.subprocess(FakeConfig(tokens=8)) as fake,
    ):
        adm, adm_cpu = asyncio.run(admission(redis.url, n_admit, blocks=8))
        a_added = table(
            f"admission alone (KeyStore.admit, {n_admit} per mode, alternating "
            "blocks; PINGs show where the time goes):",
            adm,
            adm_cpu,
            "caller",
        )
        with contextlib.ExitStack() as stack:
            targets = {
                "local": stack.enter_context(gateway(fake.base_url, None, Path(tmp), "local")),
                "redis": stack.enter_context(gateway(fake.base_url, redis.url, Path(tmp), "redis")),
            }
            if base is not None:
                targets[f"redis@{args.baseline}"] = stack.enter_context(
                    gateway(fake.base_url, redis.url, Path(tmp), "base", src=base)
                )
            e2e, e2e_cpu = asyncio.run(sequential(targets, n_e2e, blocks=8))
            e_added = table(
                f"end to end (one client, {n_e2e} requests per gateway, alternating blocks):",
                e2e,
                e2e_cpu,
                "gateway",
            )
            print(
                f"\nmost req/s, 32 concurrent clients ({rounds} alternating rounds of "
                f"{seconds:g} s each; median, min-max):"
            )
            runs: dict[str, list[float]] = {name: [] for name in targets}
            for r in range(rounds):
                order = list(targets.items())[:: 1 if r % 2 == 0 else -1]
                for name, (url, _) in order:
                    runs[name].append(asyncio.run(closed_loop(url, 32, seconds)))
            rps = {name: float(np.median(v)) for name, v in runs.items()}
            for name, v in rps.items():
                print(f"  {name:<14}{v:>9.0f} req/s  ({min(runs[name]):.0f}-{max(runs[name]):.0f})")
            print(
                f"  redis/local: {rps['redis'] / rps['local']:.2f}"
                + "".join(
                    f"; redis/{n}: {rps['redis'] / v:.2f}"
                    for n, v in rps.items()
                    if n.startswith("redis@")
                )
            )
    goal = 0.3
    print(
        f"\ngoal: <= {goal} ms added at p50 -> admission {a_added:.3f} ms, "
        f"end to end {e_added:.3f} ms: {'met' if max(a_added, e_added) <= goal else 'NOT met'}"
        f" (load avg {os.getloadavg()[0]:.1f})"
    )


if __name__ == "__main__":
    main()
