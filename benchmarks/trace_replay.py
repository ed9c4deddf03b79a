"""Trace replay (issue 24): timing, prefix sharing, round trip and memory, each side by
side with a named reference in one run.

1. Replay timing: a synthetic trace with bursts (100 requests within 10 ms) at up to
   500 req/s against a fast fake server; send lag of infersight (one worker, and two
   at the highest rate), AIPerf's fixed-schedule replay (installed on demand into
   ``.bench-venvs/aiperf``; never a dependency of infersight) and a bare asyncio sender.
2. Prefix sharing: an 80%-shared-prefix trace on the embedded engine; TTFT of the
   shared-prefix requests against the unshared ones, with llama.cpp's prompt cache on
   and turned off (``cache_prompt: false``), the hit rate and the verdict.
3. Round trip: traffic through ``infersight gateway``, its access log replayed at 1x;
   requests per second and length distributions of the two logs.
4. Memory: a 1-million-line Mooncake trace streamed (peak RSS) against loading it.

    .venv/bin/python benchmarks/trace_replay.py [--quick] [--only timing,prefix,roundtrip,memory]

``--quick``: 3,000 requests at 500 req/s only, 12 prefix requests, 20 s of round trip,
200,000 lines. ``--no-aiperf`` leaves AIPerf out.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

import _trace_cache as cache
import _trace_memory as memory
import _trace_roundtrip as roundtrip
import _trace_timing as timing
from infersight_testkit import FakeConfig, FakeOpenAI

SECTIONS = ("timing", "prefix", "roundtrip", "memory")


def run_timing(con: Console, tmp: Path, quick: bool, use_aiperf: bool) -> None:
    rates = [500.0] if quick else [125.0, 250.0, 500.0]
    n, rounds = (3000, 2) if quick else (10_000, 3)
    have_aiperf = use_aiperf and timing.aiperf_available()
    if use_aiperf and not have_aiperf:
        con.print("AIPerf did not install here: compared with the bare asyncio sender only")
    table = Table(
        "rate",
        "sender",
        "sent",
        "anchored p50 ms",
        "anchored p99 ms",
        "absolute p50 ms",
        "absolute p99 ms",
        "in bursts p99 ms",
        "outside bursts p99 ms",
        "note",
        title=f"replay timing: {n} requests, bursts of 100 within 10 ms every 5 s; "
        f"each sender's best of {rounds} interleaved rounds",
    )
    with FakeOpenAI.subprocess(FakeConfig(ttft=0.0, itl=0.0, tokens=2)) as srv:
        for rate in rates:
            trace = tmp / f"bursty-{rate:g}.jsonl"
            offsets = timing.bursty_trace(trace, n, rate, burst_every=5.0)
            best: dict[str, list[timing.Lag]] = {}
            for _ in range(rounds):  # other work on the machine only ever adds lag
                got = [timing.infersight(srv.base_url, trace, offsets)]
                if rate == rates[-1]:
                    got.append(timing.infersight(srv.base_url, trace, offsets, workers=2))
                got.append([timing.bare(srv.base_url, offsets)])
                if have_aiperf:
                    got.append([timing.aiperf(srv.base_url, trace)])
                for rows in got:
                    key = rows[0].tool
                    if key not in best or _p99(rows[0]) < _p99(best[key][0]):
                        best[key] = rows
            for rows in best.values():
                for lag in rows:
                    table.add_row(f"{rate:g}/s", *lag.row())
    con.print(table)


def _p99(lag: timing.Lag) -> float:
    return lag.anchored[1] if lag.anchored[1] is not None else float("inf")


def run_prefix(con: Console, tmp: Path, quick: bool) -> None:
    from infersight.engine import EmbeddedEngine

    n, gap = (12, 3.0) if quick else (24, 3.0)
    trace = tmp / "prefix.jsonl"
    cache.prefix_trace(trace, n, gap)
    table = Table(
        "llama.cpp prompt cache",
        "TTFT p50 shared ms",
        "TTFT p50 unshared ms",
        "shared / unshared",
        "sharing intended / sent",
        "hit rate (answers)",
        "hit rate (engine)",
        "diagnosis",
        title=f"prefix sharing: {n} requests of {cache.PROMPT} tokens, half of them "
        f"repeating a {cache.SHARED}-token prefix (80%), {gap:g} s apart",
    )
    with EmbeddedEngine(parallel=2, ctx=4096) as eng:
        table.add_row(*cache.summary("on", cache.replay(eng.base_url, trace)))
        with cache.cache_off_proxy(eng.base_url) as url:
            table.add_row(*cache.summary("off (cache_prompt: false)", cache.replay(url, trace)))
    con.print(table)


def run_roundtrip(con: Console, tmp: Path, quick: bool) -> None:
    rate, seconds = (10.0, 20.0) if quick else (20.0, 60.0)
    rt = roundtrip.round_trip(tmp, rate, seconds)
    table = Table(
        "figure",
        "original",
        "replayed at 1x",
        "replayed / original",
        title=f"round trip through infersight gateway: Poisson {rate:g} req/s for "
        f"{seconds:g} s, lognormal prompts, uniform outputs",
    )
    for row in roundtrip.compare(rt):
        table.add_row(*row)
    con.print(table)


def run_memory(con: Console, tmp: Path, quick: bool) -> None:
    n = 200_000 if quick else 1_000_000
    path = tmp / "big.jsonl"
    span = memory.big_trace(path, n)
    size = path.stat().st_size / 2**20
    table = Table(
        "what",
        "peak RSS MiB",
        "seconds",
        "detail",
        title=f"memory: a {n:,}-line Mooncake trace ({size:.0f} MiB, {span:.0f} s)",
    )
    table.add_row("reference: the file loaded as a list", *_fmt(memory.load_all(path)))
    table.add_row(
        "checking pass + streamed schedule, every body built", *_fmt(memory.stream_all(path))
    )
    with FakeOpenAI.subprocess(FakeConfig(ttft=0.0, itl=0.0, tokens=4)) as srv:
        table.add_row(
            "infersight bench --trace (its last 5 s sent)",
            *_fmt(memory.bench_window(path, srv.base_url, span, 5.0)),
        )
    con.print(table)


def _fmt(m: tuple[float, float, str]) -> list[str]:
    return [f"{m[0]:.0f}", f"{m[1]:.1f}", m[2][:90]]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller scenarios")
    ap.add_argument("--only", default=",".join(SECTIONS), help="comma-separated sections")
    ap.add_argument("--no-aiperf", action="store_true", help="leave AIPerf out")
    args = ap.parse_args()
    con = Console(width=200)
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    with tempfile.TemporaryDirectory(prefix="trace-replay-") as d:
        tmp = Path(d)
        if "timing" in only:
            run_timing(con, tmp, args.quick, not args.no_aiperf)
        if "prefix" in only:
            run_prefix(con, tmp, args.quick)
        if "roundtrip" in only:
            run_roundtrip(con, tmp, args.quick)
        if "memory" in only:
            run_memory(con, tmp, args.quick)


if __name__ == "__main__":
    main()
