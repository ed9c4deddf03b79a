"""Embedded engine scaling: aggregate output tokens/s against concurrency.

Starts the embedded llama.cpp engine (its own process), then drives it through
``infersight.client`` with a closed loop of C concurrent streamed chat requests
(64 output tokens each, EOS ignored) for each C in 1, 4, 16, 32. Throughput counts
only the tokens that arrived inside each level's steady-state window (after a warm-up),
so ramp-up and the last stragglers do not bias it.

Reported per level: output tokens/s and its ratio to C=1, completed requests, TTFT
and ITL medians, the engine's CPU (cores, from its own process) and the client's CPU
time per streamed chunk (this process only; the engine runs elsewhere).

Several engine configurations can be compared side by side in one run::

    python benchmarks/engine_scaling.py --quick
    python benchmarks/engine_scaling.py --variant parallel=8 --variant parallel=16
    python benchmarks/engine_scaling.py --url http://127.0.0.1:8000   # a running server
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import psutil

from infersight.client import Client, Timeouts
from infersight.core.errors import InfersightError
from infersight.core.records import RequestRecord
from infersight.engine import EmbeddedEngine

PROMPT = [{"role": "user", "content": "Write a short story about a lighthouse keeper."}]


@dataclass
class Level:
    concurrency: int
    window: float = 0.0
    tokens_in_window: int = 0
    completed: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    chunks: int = 0
    total_tokens: int = 0
    client_cpu_s: float = 0.0
    engine_cpu_s: float | None = None
    wall: float = 0.0
    ttft: list[float] = field(default_factory=list)
    itl: list[float] = field(default_factory=list)

    @property
    def tok_s(self) -> float:
        return self.tokens_in_window / self.window if self.window > 0 else 0.0

    @property
    def us_per_chunk(self) -> float | None:
        return self.client_cpu_s / self.chunks * 1e6 if self.chunks else None


async def _worker(
    client: Client, max_tokens: int, out: list[RequestRecord], errors: list[str]
) -> None:
    # Runs until cancelled. The record is created here and handed to the client, so
    # the tokens of a request cut off at the end of the level are still counted.
    n = 0
    while True:
        n += 1
        rec = RequestRecord(request_id=f"w{id(out)}-{n}", scheduled=time.monotonic())
        out.append(rec)
        try:
            await client.chat(
                PROMPT,
                max_tokens=max_tokens,
                stream=True,
                ignore_eos=True,
                temperature=0.8,
                record=rec,
            )
        except InfersightError as e:
            errors.append(e.kind)
            await asyncio.sleep(0.05)


async def run_level(
    client: Client,
    c: int,
    *,
    warmup: float,
    duration: float,
    max_tokens: int,
    engine_pid: int | None,
) -> Level:
    records: list[RequestRecord] = []
    errors: list[str] = []
    eng = psutil.Process(engine_pid) if engine_pid else None
    eng_cpu0 = sum(eng.cpu_times()[:2]) if eng else 0.0
    cpu0 = time.process_time()
    t0 = time.monotonic()
    stop_at = t0 + warmup + duration
    tasks = [asyncio.create_task(_worker(client, max_tokens, records, errors)) for _ in range(c)]
    await asyncio.sleep(warmup + duration)
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    lvl = Level(concurrency=c, wall=time.monotonic() - t0)
    lvl.client_cpu_s = time.process_time() - cpu0
    if eng:
        lvl.engine_cpu_s = sum(eng.cpu_times()[:2]) - eng_cpu0
    w0, w1 = t0 + warmup, stop_at
    lvl.window = w1 - w0
    for r in records:
        lvl.chunks += len(r.chunk_times)
        lvl.total_tokens += sum(r.chunk_tokens)
        lvl.tokens_in_window += sum(
            k for t, k in zip(r.chunk_times, r.chunk_tokens, strict=False) if w0 <= t < w1
        )
        if r.ok and r.end is not None and w0 <= r.end < w1:
            lvl.completed += 1
            if r.ttft is not None:
                lvl.ttft.append(r.ttft)
            lvl.itl.extend(b - a for a, b in zip(r.chunk_times, r.chunk_times[1:], strict=False))
    for kind in errors:
        lvl.errors[kind] = lvl.errors.get(kind, 0) + 1
    return lvl


def _median_ms(xs: list[float]) -> str:
    return f"{statistics.median(xs) * 1e3:.0f}" if xs else "-"


def print_table(title: str, levels: list[Level], settings: dict[str, Any]) -> None:
    print(f"\n== {title}")
    keys = ("parallel", "ctx_per_slot", "threads", "n_batch", "n_ubatch", "omp_wait_policy")
    print("   " + ", ".join(f"{k}={settings[k]}" for k in keys if k in settings))
    base = levels[0].tok_s if levels and levels[0].concurrency == 1 else None
    head = (
        f"{'conc':>5} {'tok/s':>8} {'x c=1':>6} {'done':>5} {'err':>4} {'TTFT p50 ms':>12} "
        f"{'ITL p50 ms':>11} {'engine cores':>13} {'tok/engine-CPU-s':>17} "
        f"{'client us/chunk':>16}"
    )
    print(head)
    print("-" * len(head))
    for lv in levels:
        ratio = f"{lv.tok_s / base:.2f}" if base else "-"
        cores = f"{lv.engine_cpu_s / lv.wall:.2f}" if lv.engine_cpu_s is not None else "-"
        # Tokens per engine CPU-second: the batching gain, independent of how much CPU
        # a noisy machine left the engine (wall-clock tok/s is not).
        eff = f"{lv.total_tokens / lv.engine_cpu_s:.1f}" if lv.engine_cpu_s else "-"
        us = f"{lv.us_per_chunk:.0f}" if lv.us_per_chunk is not None else "-"
        print(
            f"{lv.concurrency:>5} {lv.tok_s:>8.1f} {ratio:>6} {lv.completed:>5} "
            f"{sum(lv.errors.values()):>4} {_median_ms(lv.ttft):>12} {_median_ms(lv.itl):>11} "
            f"{cores:>13} {eff:>17} {us:>16}"
        )
    errs = {k: v for lv in levels for k, v in lv.errors.items()}
    if errs:
        print(f"   errors: {errs}")


_INT_KEYS = {"parallel", "ctx", "threads", "n_batch", "n_ubatch", "http_threads"}


def _parse_variant(text: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, _, value = part.partition("=")
        if key == "omp":
            out["omp_wait_policy"] = value.upper()
        elif key in _INT_KEYS:
            out[key] = int(value)
        else:
            raise SystemExit(f"error: unknown engine setting {key!r} in --variant {text!r}")
    return out


@contextlib.contextmanager
def _engine(variant: dict[str, Any], url: str | None) -> Iterator[tuple[str, int | None, Any]]:
    if url:
        yield url, None, {"url": url}
        return
    with EmbeddedEngine(**variant) as eng:
        yield eng.base_url, eng.pid, eng.settings


async def bench_variant(
    base_url: str, engine_pid: int | None, args: argparse.Namespace
) -> list[Level]:
    timeouts = Timeouts(connect=10.0, total=120.0)
    async with Client(base_url, timeouts=timeouts) as client:
        await client.warmup()
        levels = []
        for c in args.concurrency:
            levels.append(
                await run_level(
                    client,
                    c,
                    warmup=args.warmup,
                    duration=args.duration,
                    max_tokens=args.max_tokens,
                    engine_pid=engine_pid,
                )
            )
        return levels


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="short levels (whole run < 60 s)")
    ap.add_argument(
        "--concurrency", type=lambda s: [int(x) for x in s.split(",")], default=[1, 4, 16, 32]
    )
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--duration", type=float, default=20.0, help="seconds measured per level")
    ap.add_argument("--warmup", type=float, default=3.0, help="seconds cut at each level start")
    ap.add_argument(
        "--variant",
        action="append",
        default=[],
        help="engine settings, e.g. 'parallel=16,n_ubatch=256' or 'omp=active' "
        "(repeatable; each variant gets its own engine and table)",
    )
    ap.add_argument("--url", help="benchmark a running server instead of the embedded engine")
    args = ap.parse_args(argv)
    if args.quick:
        args.duration, args.warmup = min(args.duration, 7.0), min(args.warmup, 1.5)
    variants = [_parse_variant(v) for v in args.variant] or [{}]
    print(
        f"engine scaling: {args.max_tokens} output tokens/request, EOS ignored, "
        f"{args.duration:.0f} s per level after {args.warmup:.1f} s warm-up; "
        f"{psutil.cpu_count()} CPUs, load avg {psutil.getloadavg()[0]:.1f}"
    )
    for variant in variants:
        with _engine(variant, args.url) as (url, pid, settings):
            levels = asyncio.run(bench_variant(url, pid, args))
        title = ", ".join(f"{k}={v}" for k, v in variant.items()) or "engine defaults"
        print_table(title if not args.url else args.url, levels, settings)
        by_c = {lv.concurrency: lv.tok_s for lv in levels}
        if 1 in by_c and 16 in by_c and by_c[1] > 0:
            ratio = by_c[16] / by_c[1]
            verdict = "meets" if ratio >= 1.7 else "MISSES"
            print(f"   c=16 / c=1 = {ratio:.2f}x ({verdict} the 1.7x target)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
