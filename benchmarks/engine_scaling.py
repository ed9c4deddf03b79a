"""Embedded engine scaling: aggregate output tokens/s against concurrency, beside raw llama.cpp.

Starts the embedded llama.cpp engine (its own process), then drives it through
``infersight.client`` with a closed loop of C concurrent streamed chat requests
(64 output tokens each, EOS ignored) for each C. Throughput counts only the tokens
that arrived inside each level's steady-state window (after a warm-up), so ramp-up and
the last stragglers do not bias it.

``--raw`` adds the reference: the same library (xllamacpp's ``Server``) with
llama-server's defaults (threads, OpenMP wait policy, batch sizes, logging: nothing
set but the model, the slots and the context), in its own process. Every side stays
up for the whole run; the sides not being measured are frozen (SIGSTOP), so an idle
server that spins cannot steal the CPU from the one being measured, and each level is
measured side by side, in alternating order, ``--rounds`` times. The table gives the
median per side and infersight/raw per level.

``--busy`` measures every level twice more with another process spinning one core
(a plain ``while True`` loop, not pinned): busy/quiet per side says whether a server
collapses when it shares the machine.

Each row also says what the machine was doing meanwhile: the CPU (in cores) used by
processes other than the server, this client and the spinner.

    python benchmarks/engine_scaling.py --quick --raw --busy     # the issue-13 check
    python benchmarks/engine_scaling.py --raw --busy             # 12 s per measurement
    python benchmarks/engine_scaling.py --variant parallel=8 --variant parallel=16
    python benchmarks/engine_scaling.py --url http://127.0.0.1:8000   # a running server
    python benchmarks/engine_scaling.py --raw --serve --serve-baseline main   # serve vs raw

``--serve`` adds `infersight serve` as a side (the gateway in front of the engine: what
users of serve get), ``--serve-baseline REV`` the same command at another revision.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from infersight.client import Client, Timeouts
from infersight.core.errors import InfersightError
from infersight.core.records import RequestRecord

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _baseline import baseline_src
from engine_sides import RAW, Side, ours, raw, served, spinner

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
    others_cores: float | None = None
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


def _busy_cores() -> float:
    t = psutil.cpu_times()
    return float(t.user + t.nice + t.system + getattr(t, "irq", 0.0) + getattr(t, "softirq", 0.0))


def _cpu(p: psutil.Process | None) -> float:
    """CPU seconds of ``p`` and its children (serve: the gateway and the engine)."""
    if p is None:
        return 0.0
    total = 0.0
    with contextlib.suppress(psutil.Error):
        for q in (p, *p.children(recursive=True)):
            with contextlib.suppress(psutil.Error):
                total += float(sum(q.cpu_times()[:2]))
    return total


async def run_level(
    client: Client,
    c: int,
    *,
    warmup: float,
    duration: float,
    max_tokens: int,
    engine_pid: int | None,
    spinner_pid: int | None = None,
) -> Level:
    records: list[RequestRecord] = []
    errors: list[str] = []
    eng = psutil.Process(engine_pid) if engine_pid else None
    spin = psutil.Process(spinner_pid) if spinner_pid else None
    me = psutil.Process()
    eng_cpu0, spin_cpu0, my_cpu0, all0 = _cpu(eng), _cpu(spin), _cpu(me), _busy_cores()
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
        lvl.engine_cpu_s = _cpu(eng) - eng_cpu0
    ours = (lvl.engine_cpu_s or 0.0) + (_cpu(spin) - spin_cpu0) + (_cpu(me) - my_cpu0)
    lvl.others_cores = max(0.0, (_busy_cores() - all0 - ours) / lvl.wall)
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
    keys = ("parallel", "ctx_per_slot", "threads", "n_batch", "n_ubatch", "omp_wait")
    print("   " + ", ".join(f"{k}={settings[k]}" for k in keys if k in settings))
    base = levels[0].tok_s if levels and levels[0].concurrency == 1 else None
    head = (
        f"{'conc':>5} {'tok/s':>8} {'x c=1':>6} {'done':>5} {'err':>4} {'TTFT p50 ms':>12} "
        f"{'ITL p50 ms':>11} {'engine cores':>13} {'tok/engine-CPU-s':>17} "
        f"{'client us/chunk':>16} {'others cores':>13}"
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
        others = f"{lv.others_cores:.2f}" if lv.others_cores is not None else "-"
        print(
            f"{lv.concurrency:>5} {lv.tok_s:>8.1f} {ratio:>6} {lv.completed:>5} "
            f"{sum(lv.errors.values()):>4} {_median_ms(lv.ttft):>12} {_median_ms(lv.itl):>11} "
            f"{cores:>13} {eff:>17} {us:>16} {others:>13}"
        )
    errs = {k: v for lv in levels for k, v in lv.errors.items()}
    if errs:
        print(f"   errors: {errs}")


_INT_KEYS = {"parallel", "ctx", "threads", "n_batch", "n_ubatch", "http_threads"}


def _parse_variant(text: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, _, value = part.partition("=")
        if key in ("omp", "wait"):
            out["omp_wait_policy"] = value.upper()
        elif key == "spin":
            out["omp_spin_count"] = int(value)
        elif key in _INT_KEYS:
            out[key] = int(value)
        else:
            raise SystemExit(f"error: unknown engine setting {key!r} in --variant {text!r}")
    return out


async def _measure(
    side: Side,
    client: Client,
    c: int,
    args: argparse.Namespace,
    spinner: int | None,
    *,
    freeze_after: bool,
) -> Level:
    side.freeze(False)
    try:
        return await run_level(
            client,
            c,
            warmup=args.warmup,
            duration=args.duration,
            max_tokens=args.max_tokens,
            engine_pid=side.pid,
            spinner_pid=spinner,
        )
    finally:
        await asyncio.sleep(0.3)  # cancelled streams end before the server is frozen
        if freeze_after:
            side.freeze(True)


async def bench_sides(sides: list[Side], args: argparse.Namespace) -> None:
    timeouts = Timeouts(connect=10.0, total=120.0)
    several = len(sides) > 1
    async with contextlib.AsyncExitStack() as stack:
        clients = [await stack.enter_async_context(Client(s.url, timeouts=timeouts)) for s in sides]
        for s, cl in zip(sides, clients, strict=True):
            s.freeze(False)
            # The model each server names (serve checks it; llama.cpp takes any).
            cl.model = next(iter(await cl.models()), None)
            await cl.warmup()
            if several:
                s.freeze(True)
        for c in args.concurrency:
            for r in range(args.rounds):
                # Alternate the order each round so drift in the machine's load
                # does not favour one side.
                order = list(zip(sides, clients, strict=True))[:: 1 if r % 2 == 0 else -1]
                for s, cl in order:
                    lv = await _measure(s, cl, c, args, None, freeze_after=several)
                    s.quiet.setdefault(c, []).append(lv)
                if args.busy:
                    with spinner() as pid:
                        await asyncio.sleep(0.2)
                        for s, cl in order[::-1]:
                            lv = await _measure(s, cl, c, args, pid, freeze_after=several)
                            s.busy.setdefault(c, []).append(lv)


def _med(levels: list[Level]) -> float:
    return statistics.median(lv.tok_s for lv in levels) if levels else 0.0


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}" if b > 0 else "-"


def print_comparison(sides: list[Side], args: argparse.Namespace) -> None:
    ref = next((s for s in sides if s.name == RAW), None)
    print(
        f"\n== side by side: medians of {args.rounds} rounds of {args.duration:.0f} s per "
        f"level (tok/s; 'others': cores that other processes used meanwhile)"
    )
    head = f"{'conc':>5} {'server':<24} {'quiet':>8} {'vs raw':>7} {'others':>7}"
    head += f" {'busy':>8} {'vs raw':>7} {'busy/quiet':>11} {'others':>7}" if args.busy else ""
    print(head + "\n" + "-" * len(head))
    for c in args.concurrency:
        for s in sides:
            row = f"{c:>5} {s.name[:24]:<24}"
            for cond in ("quiet", "busy") if args.busy else ("quiet",):
                runs = getattr(s, cond).get(c, [])
                v = _med(runs)
                base = _med(getattr(ref, cond)[c]) if ref else 0.0
                row += f" {v:>8.1f} {_ratio(v, base) if ref is not s else '':>7}"
                row += f" {_ratio(v, _med(s.quiet[c])):>11}" if cond == "busy" else ""
                row += f" {statistics.median(lv.others_cores or 0.0 for lv in runs):>7.2f}"
            print(row)
    for s in (s for s in sides if s is not ref):
        levels = args.concurrency
        if ref:
            vs = [f"c={c} {_ratio(_med(s.quiet[c]), _med(ref.quiet[c]))}" for c in levels]
            print(f"   {s.name}: infersight/raw {', '.join(vs)} (goal >= 0.95 on a quiet machine)")
        if args.busy:
            bq = [f"c={c} {_ratio(_med(s.busy[c]), _med(s.quiet[c]))}" for c in levels]
            print(f"   {s.name}: busy/quiet {', '.join(bq)} (goal >= 0.50: no collapse)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="short levels (5 s, 2 rounds)")
    ap.add_argument(
        "--concurrency",
        type=lambda s: [int(x) for x in s.split(",")],
        help="levels (default 1,4,16,32; 1,8 with --raw or --busy)",
    )
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument(
        "--duration", type=float, help="seconds per measurement (default 20; 12 with --raw/--busy)"
    )
    ap.add_argument("--warmup", type=float, default=3.0, help="seconds cut at each level start")
    ap.add_argument(
        "--rounds",
        type=int,
        help="measurements per level and side, in alternating order "
        "(default 1; 3 with --raw/--busy)",
    )
    ap.add_argument(
        "--raw",
        action="store_true",
        help="also measure xllamacpp with llama-server defaults, side by side",
    )
    ap.add_argument(
        "--busy",
        action="store_true",
        help="also measure every level while another process spins one core",
    )
    ap.add_argument("--parallel", type=int, default=8, help="slots (both sides)")
    ap.add_argument(
        "--variant",
        action="append",
        default=[],
        help="engine settings, e.g. 'parallel=16,n_ubatch=256', 'threads=1' or 'wait=passive' "
        "(repeatable; each variant is one more side)",
    )
    ap.add_argument("--url", help="benchmark a running server instead of the embedded engine")
    ap.add_argument(
        "--serve",
        action="store_true",
        help="also measure `infersight serve` (the gateway in front of the engine)",
    )
    ap.add_argument(
        "--serve-baseline",
        metavar="REV",
        help="also measure `infersight serve` as it is at git revision REV",
    )
    args = ap.parse_args(argv)
    compare = args.raw or args.busy
    args.concurrency = args.concurrency or ([1, 8] if compare else [1, 4, 16, 32])
    args.duration = args.duration or (12.0 if compare else 20.0)
    args.rounds = args.rounds or (3 if compare else 1)
    if args.quick:
        args.duration, args.warmup = min(args.duration, 5.0), min(args.warmup, 1.5)
        args.rounds = min(args.rounds, 2)
    variants = [_parse_variant(v) for v in args.variant] or [{}]
    names = [", ".join(f"{k}={val}" for k, val in v.items()) or "infersight" for v in variants]
    for v in variants:
        v.setdefault("parallel", args.parallel)
    print(
        f"engine scaling: {args.max_tokens} output tokens/request, EOS ignored, "
        f"{args.duration:.0f} s per measurement after {args.warmup:.1f} s warm-up; "
        f"{psutil.cpu_count()} CPUs, load avg {psutil.getloadavg()[0]:.1f}"
    )
    with contextlib.ExitStack() as stack:
        if args.url:
            sides = [Side(name=args.url, url=args.url, pid=None, settings={"url": args.url})]
        else:
            sides = [stack.enter_context(ours(v, n)) for v, n in zip(variants, names, strict=True)]
        v0 = variants[0]
        if args.serve:
            sides.append(stack.enter_context(served(v0["parallel"], v0.get("ctx"), None)))
        if args.serve_baseline:
            src = baseline_src(args.serve_baseline)
            sides.append(
                stack.enter_context(
                    served(v0["parallel"], v0.get("ctx"), src, f"serve at {args.serve_baseline}")
                )
            )
        if args.raw and not args.url:
            first = sides[0].settings
            sides.append(
                stack.enter_context(raw(first["parallel"], first["ctx"], first["model_path"]))
            )
        try:
            asyncio.run(bench_sides(sides, args))
        finally:
            for s in sides:
                s.freeze(False)
    for s in sides:
        levels = [lv for c in args.concurrency for lv in s.quiet.get(c, [])]
        print_table(s.name, levels, s.settings)
    if compare:
        print_comparison(sides, args)
    else:
        for s in sides:
            by_c = {lv.concurrency: lv.tok_s for lv in s.quiet.get(1, []) + s.quiet.get(16, [])}
            if 1 in by_c and 16 in by_c and by_c[1] > 0:
                ratio = by_c[16] / by_c[1]
                verdict = "meets" if ratio >= 1.7 else "MISSES"
                print(f"   {s.name}: c=16 / c=1 = {ratio:.2f}x ({verdict} the 1.7x target)")
    print(f"load avg at the end: {psutil.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
