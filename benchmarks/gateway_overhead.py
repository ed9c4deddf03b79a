"""What latency and CPU does the gateway add per request, and how many req/s does a core serve?

Side by side in one run, against a fast fake upstream on 127.0.0.1 (FakeOpenAI in its
own process, 16 tokens, no generation delay), pinned like a deployment on two cores:
the upstream on one core, the proxy and the load generator on the other.

- added latency p50/p99 and the proxy's CPU per request at fixed open-loop rates
  (200 and 500 req/s), non-streamed and streamed: the same load goes direct to the
  upstream and through each proxy, in alternating blocks (ABBA order) so drift on a
  shared machine hits all alike;
- capacity: closed loop, many clients, the proxy alone on its core (load generator and
  upstream on the other): req/s reached and req/s per core of proxy CPU
  (requests / proxy CPU seconds), non-streamed and streamed;
- references: nginx (Debian's, one worker: the floor of a C proxy), a bare aiohttp
  proxy (the floor of any aiohttp gateway), optionally another checkout's gateway
  (``--baseline-src /path/to/main/src``: before/after in one run) and LiteLLM
  (``--litellm``, installed on demand into ``.bench-venvs/litellm``);
- ``--profile``: where the gateway's CPU goes, per part, in microseconds per request
  (cProfile on CPU time inside the gateway; ``--pyspy``: py-spy from outside);
- embeddings with and without the gateway's dynamic batching.

Every figure comes with the load average and the CPU that other processes used
during it: on a busy machine the absolute numbers inflate; the side-by-side ones hold.

    python benchmarks/gateway_overhead.py --quick        # ~3 min on a quiet machine
    python benchmarks/gateway_overhead.py                # full run, ~6 min
    python benchmarks/gateway_overhead.py --quick --profile --baseline-src ../main/src
    python benchmarks/gateway_overhead.py --quick --no-batching --baseline main
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import sys
import tempfile
from pathlib import Path

import orjson
import psutil

from _baseline import baseline_src
from _gateway_load import Meter, closed_loop, pct, rate_compare
from _gateway_profile import CPROFILE_PREFIX, Profiler, print_breakdown, pyspy_binary
from _gateway_targets import (
    Target,
    aiohttp_proxy_process,
    gateway_process,
    litellm_process,
    nginx_process,
)
from infersight_testkit.fake.openai import FakeConfig, FakeOpenAI

#: The goal (issue 23): the gateway stays within 10% of the revision it replaces, measured
#: side by side (``--baseline``); without one the figures are printed with no call.
WITHIN = 0.10


def pin(pid: int, cpus: list[int] | None) -> None:
    if cpus:
        with contextlib.suppress(psutil.Error, OSError):
            psutil.Process(pid).cpu_affinity(cpus)


def conditions(m: Meter) -> str:
    return (
        f"load avg {os.getloadavg()[0]:.1f}, other processes {m.others_pct():.0f}% of the machine"
    )


def rate_table(
    targets: list[Target],
    rates: list[float],
    seconds: float,
    blocks: int,
    verdict: dict[str, dict[str, float]],
) -> None:
    hdr = (
        f"{'mode':<7}{'rate':>6}  {'target':<11}{'p50 ms':>10}{'p99 ms':>10}{'+p50':>10}"
        f"{'+p99':>10}{'cpu ms/req':>12}{'err':>5}{'n':>7}"
    )
    print(hdr)
    print("-" * len(hdr))
    for stream in (False, True):
        for rate in rates:
            m = Meter()
            res = asyncio.run(rate_compare(targets, rate, stream, seconds, blocks))
            base = res["direct"].lat
            mode = "stream" if stream else "json"
            for t in targets:
                s = res[t.name]
                add50, add99 = pct(s.lat, 50) - pct(base, 50), pct(s.lat, 99) - pct(base, 99)
                added = f"{add50:>10.3f}{add99:>10.3f}" if t.name != "direct" else " " * 20
                cpu = s.cpu_ms_per_req()
                print(
                    f"{mode:<7}{rate:>6.0f}  {t.name:<11}{pct(s.lat, 50):>10.3f}"
                    f"{pct(s.lat, 99):>10.3f}{added}{cpu:>12.3f}{s.errors:>5}{len(s.lat):>7}"
                )
                if t.name in ("infersight", "baseline"):
                    verdict.setdefault(f"added p50 ms, {mode} {rate:.0f}/s", {})[t.name] = add50
                    verdict.setdefault(f"CPU ms/request, {mode} {rate:.0f}/s", {})[t.name] = cpu
            print(f"{'':<15}({conditions(m)})")


def capacity_table(
    targets: list[Target],
    concurrency: int,
    seconds: float,
    load_cpus: list[int] | None,
    verdict: dict[str, dict[str, float]],
) -> dict[bool, float]:
    """Closed-loop capacity per target; returns the gateway's CPU ms per request
    by mode (stream or not)."""
    gw_cpu: dict[bool, float] = {}
    where = "the proxy alone on its core" if load_cpus else "unpinned"
    print(
        f"\ncapacity (closed loop, {concurrency} clients, {seconds:g} s; {where}; "
        "per core = requests / proxy CPU seconds):"
    )
    print(
        f"  {'mode':<7}{'target':<11}{'req/s':>8}{'proxy cpu':>11}{'per core':>10}"
        f"{'cpu ms/req':>12}"
    )
    for stream in (False, True):
        m = Meter()
        for t in targets:
            s = asyncio.run(closed_loop(t, concurrency, seconds, stream))
            per_core = len(s.lat) / s.cpu_s if s.cpu_s else float("nan")
            cpu_pct = 100.0 * s.cpu_s / s.wall if s.wall else float("nan")
            print(
                f"  {'stream' if stream else 'json':<7}{t.name:<11}{s.rps():>8.0f}"
                f"{cpu_pct if t.pid else float('nan'):>10.0f}%"
                f"{per_core if t.name != 'direct' else float('nan'):>10.0f}"
                f"{s.cpu_ms_per_req():>12.3f}"
            )
            if t.name == "infersight":
                gw_cpu[stream] = s.cpu_ms_per_req()
            if t.name in ("infersight", "baseline"):
                # Lower is better for every figure but this one: stored as its inverse.
                verdict.setdefault(
                    f"1 / (req/s at capacity), {'stream' if stream else 'json'}", {}
                )[t.name] = 1.0 / s.rps() if s.rps() else float("nan")
        print(f"  ({conditions(m)})")
    return gw_cpu


def print_goal(verdict: dict[str, dict[str, float]]) -> None:
    """This gateway against the baseline, each figure within 10% (lower is better)."""
    pairs = {k: v for k, v in verdict.items() if "infersight" in v and "baseline" in v}
    if not pairs:
        print("\ngoal: within 10% of the revision it replaces (give --baseline to judge)")
        return
    print(f"\ngoal: within {WITHIN:.0%} of the baseline, side by side (this / baseline):")
    for k, v in pairs.items():
        ratio = v["infersight"] / v["baseline"] if v["baseline"] else float("nan")
        print(f"  {k:<34}{ratio:>7.2f}  {'ok' if ratio <= 1 + WITHIN else 'MISS'}")


def profile_gateway(
    gw: Target, prof: Profiler, concurrency: int, seconds: float, cpu_ms: dict[bool, float]
) -> None:
    """Each part's share of the profile times the CPU per request measured without the
    profiler (``cpu_ms``, from the capacity run)."""
    print(
        f"\nprofile of the infersight gateway ({prof.kind}, closed loop, {concurrency} clients, "
        f"{seconds:g} s each):"
    )
    for stream in (False, True):
        prof.start()
        s = asyncio.run(closed_loop(gw, concurrency, seconds, stream))
        result = prof.stop()
        if result is None:
            print("  (no profile came back)")
            continue
        print_breakdown(
            "json" if not stream else "stream",
            result,
            1000.0 * cpu_ms.get(stream, s.cpu_ms_per_req()),
        )


def batching_gain(seconds: float, concurrency: int) -> None:
    """Embeddings through the gateway with and without dynamic batching.

    The fake upstream costs 5 ms per call + 0.2 ms per input, a fixed per-call cost
    like a real embedding server's (one forward pass, one HTTP exchange)."""
    cfg = FakeConfig(embed_base=0.005, embed_per_item=0.0002)
    print(
        f"\nbatching gain (embeddings, {concurrency} concurrent clients, upstream 5 ms/call "
        "+ 0.2 ms/input):"
    )
    body = orjson.dumps({"model": "fake", "input": "some text to embed"})
    with FakeOpenAI.subprocess(cfg) as fake:
        for label, env in (
            ("batching off", '{"enabled": false}'),
            ("batching on ", '{"max_batch_size": 64, "max_wait_ms": 2}'),
        ):
            with gateway_process(
                "infersight", fake.base_url, env={"INFERSIGHT_GATEWAY_BATCH": env}
            ) as gw:
                fake.reset()
                s = asyncio.run(
                    closed_loop(gw, concurrency, seconds, False, path="/v1/embeddings", body=body)
                )
                calls = fake.stats()["by_path"].get("/v1/embeddings", 0)
                print(
                    f"  {label}  {s.rps():>8.0f} req/s   p50 {pct(s.lat, 50):>8.2f} ms   "
                    f"upstream calls {calls}"
                )


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="short run (~2 min)")
    ap.add_argument("--rates", default="200,500")
    ap.add_argument("--seconds", type=float, default=None, help="seconds per rate and target")
    ap.add_argument("--concurrency", type=int, default=64, help="clients for the capacity run")
    ap.add_argument("--no-pin", action="store_true", help="do not pin processes to cores")
    ap.add_argument("--no-nginx", action="store_true", help="leave nginx out")
    ap.add_argument("--no-aiohttp", action="store_true", help="leave the bare aiohttp proxy out")
    ap.add_argument("--baseline-src", help="also run the gateway from this checkout's src folder")
    ap.add_argument(
        "--baseline",
        metavar="REV",
        help="also run the gateway of git revision REV (a git archive of its src)",
    )
    ap.add_argument(
        "--profile",
        action="store_true",
        help="profile the gateway at capacity (cProfile on CPU time)",
    )
    ap.add_argument(
        "--pyspy",
        action="store_true",
        help="with --profile: sample with py-spy instead (installed on first use)",
    )
    ap.add_argument("--no-batching", action="store_true", help="skip the batching-gain part")
    ap.add_argument(
        "--litellm",
        action="store_true",
        help="also measure LiteLLM's proxy (installs it into .bench-venvs/litellm)",
    )
    args = ap.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[attr-defined]
    seconds = args.seconds or (3.0 if args.quick else 12.0)
    cap_seconds = 3.0 if args.quick else 8.0
    rates = [float(r) for r in args.rates.split(",")]
    with contextlib.suppress(ImportError):
        import uvloop

        uvloop.install()
    cpus = sorted(os.sched_getaffinity(0))
    pinned = not args.no_pin and len(cpus) >= 2
    up_cpus, gw_cpus = ([cpus[0]], [cpus[1]]) if pinned else (None, None)
    pyspy = pyspy_binary() if args.profile and args.pyspy else None
    use_cprofile = args.profile and pyspy is None
    verdict: dict[str, dict[str, float]] = {}

    with contextlib.ExitStack() as stack:
        fake = stack.enter_context(FakeOpenAI.subprocess(FakeConfig(ttft=0.0, itl=0.0, tokens=16)))
        pin(fake.pid, up_cpus)
        direct = Target("direct", fake.base_url, fake.pid)
        cprof = Path(tempfile.mkdtemp(prefix="bench-cprof-")) / "gateway.prof"
        stack.callback(shutil.rmtree, cprof.parent, True)
        gw = stack.enter_context(
            gateway_process(
                "infersight",
                fake.base_url,
                prefix=CPROFILE_PREFIX if use_cprofile else None,
                env={"BENCH_CPROFILE_OUT": str(cprof)},
            )
        )
        targets = [direct, gw]
        if args.baseline and not args.baseline_src:
            args.baseline_src = str(baseline_src(args.baseline))
        if args.baseline_src:
            targets.append(
                stack.enter_context(
                    gateway_process("baseline", fake.base_url, src=args.baseline_src)
                )
            )
        refs = [] if args.no_nginx else [stack.enter_context(nginx_process(fake.base_url))]
        if not args.no_aiohttp:
            refs.append(stack.enter_context(aiohttp_proxy_process(fake.base_url)))
        if args.litellm:
            refs.append(stack.enter_context(litellm_process(fake.base_url)))
        targets += [t for t in refs if t is not None]
        for t in targets[1:]:
            assert t.pid is not None
            pin(t.pid, gw_cpus)
        pin(os.getpid(), gw_cpus)
        print(
            f"upstream: FakeOpenAI (16 tokens, no delay); {len(cpus)} CPUs; "
            + (
                f"upstream on CPU {cpus[0]}, proxies and load generator on CPU {cpus[1]}"
                if pinned
                else "not pinned"
            )
            + f"; {seconds:g} s per rate and target in alternating blocks\n"
            f"+p50/+p99: added to direct (ms); cpu ms/req: the serving process's CPU per "
            f"request\n"
        )
        rate_table(targets, rates, seconds, 2 if args.quick else 4, verdict)
        pin(os.getpid(), up_cpus)  # capacity: the proxy alone on its core
        gw_cpu = capacity_table(targets, args.concurrency, cap_seconds, up_cpus, verdict)
        if args.profile:
            assert gw.pid is not None
            profile_gateway(
                gw, Profiler(gw.pid, pyspy, cprof, up_cpus), args.concurrency, cap_seconds, gw_cpu
            )
    if not args.no_batching:
        pin(os.getpid(), cpus)
        batching_gain(cap_seconds, args.concurrency)
    print_goal(verdict)
    print(
        "note: on a shared machine absolute figures inflate with the others' load shown "
        "beside each; re-run on a quiet machine for the record."
    )


if __name__ == "__main__":
    main()
