"""Batch throughput: adaptive concurrency against sequential and the best fixed level.

Starts the embedded llama.cpp engine (its own process; or use ``--url``) and runs
``infersight.batch`` over rows of 64 output tokens each (``ignore_eos``), all in one
run:

1. ``sequential``: concurrency 1 on a sample of the rows;
2. ``sweep``: fixed concurrency 2, 4, 8, 16, 32 on samples of the rows (a short sweep);
3. ``adaptive``: ``batch`` with the adaptive limiter on all the rows (ramp included);
4. ``best fixed``: the best sweep level on all the rows, for a like-for-like total
   (the aim is checked against this run; the sweep samples are shorter, noisier).

Throughput is rows (and output tokens) per second from the first send to the last
answer of each run. The aims (issue 7): adaptive within 10% of the best fixed level
and at least 1.7x sequential.

    python benchmarks/batch_throughput.py --quick
    python benchmarks/batch_throughput.py --rows 500 --tokens 64
    python benchmarks/batch_throughput.py --url http://127.0.0.1:8000 --model my-model
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from infersight.batch import BatchConfig, BatchSummary, run_batch_async


def write_rows(path: Path, n: int, tokens: int, start: int = 0) -> None:
    with path.open("w") as f:
        for i in range(start, start + n):
            body = {
                "prompt": f"Write a long story about the number {i}.",
                "max_tokens": tokens,
                "ignore_eos": True,
                "temperature": 0.0,
            }
            f.write(
                json.dumps(
                    {"custom_id": f"r{i}", "method": "POST", "url": "/v1/completions", "body": body}
                )
                + "\n"
            )


async def run(
    url: str,
    tmp: Path,
    name: str,
    rows: int,
    tokens: int,
    concurrency: int | None,
    model: str | None,
) -> BatchSummary:
    inp, out = tmp / f"{name}.in.jsonl", tmp / f"{name}.out.jsonl"
    write_rows(inp, rows, tokens)
    cfg = BatchConfig(
        input=inp,
        output=out,
        url=url,
        concurrency=concurrency,
        model=model,
        timeout=900,
        quiet=True,
        fsync=True,
    )
    t = time.monotonic()
    s = await run_batch_async(cfg)
    print(
        f"  {name:<14} c={concurrency or 'adaptive':<8} {s.done:>4} rows "
        f"{s.rows_per_s:7.3f} rows/s "
        f"({time.monotonic() - t:5.1f} s, settled {s.concurrency_settled})",
        flush=True,
    )
    if s.failed:
        print(f"    {s.failed} rows failed: {s.failed_by_kind}")
    return s


@contextlib.contextmanager
def target(args: argparse.Namespace) -> Iterator[str]:
    if args.url:
        yield args.url
        return
    from infersight.engine import EmbeddedEngine

    with EmbeddedEngine(parallel=args.parallel) as eng:
        print(
            f"embedded engine: {eng.model_name}, parallel={args.parallel}, threads="
            f"{eng.settings.get('threads')}",
            flush=True,
        )
        yield eng.base_url


async def main_async(args: argparse.Namespace, url: str) -> None:
    with tempfile.TemporaryDirectory(prefix="batch-bench-") as d:
        tmp = Path(d)
        await run(url, tmp, "warmup", 4, 8, 2, args.model)
        results: list[tuple[str, int | None, BatchSummary]] = []
        seq = await run(url, tmp, "sequential", args.sample_seq, args.tokens, 1, args.model)
        results.append(("sequential", 1, seq))
        sweep: list[tuple[int, BatchSummary]] = []
        for c in args.levels:
            s = await run(
                url, tmp, f"sweep-c{c}", max(args.sample, 2 * c), args.tokens, c, args.model
            )
            sweep.append((c, s))
            results.append((f"sweep c={c}", c, s))
        best_c, best = max(sweep, key=lambda x: x[1].rows_per_s)
        adaptive = await run(url, tmp, "adaptive", args.rows, args.tokens, None, args.model)
        results.append(("adaptive", None, adaptive))
        full_best = await run(url, tmp, "best-fixed", args.rows, args.tokens, best_c, args.model)
        results.append((f"best fixed c={best_c} (all rows)", best_c, full_best))

    # Like for like: the best sweep level run over the same rows as adaptive. The
    # sweep's own short samples are noisier; they are shown for reference.
    ref = full_best.rows_per_s
    print()
    print(
        f"{'run':<28} {'conc.':>9} {'rows':>5} {'rows/s':>8} {'out tok/s':>10} {'x seq':>6} "
        f"{'vs best':>8}"
    )
    for name, c, s in results:
        conc = f"{s.concurrency_settled:g}*" if c is None and s.concurrency_settled else str(c)
        print(
            f"{name:<28} {conc:>9} {s.done:>5} {s.rows_per_s:8.3f} {s.output_tokens_per_s:10.1f} "
            f"{s.rows_per_s / seq.rows_per_s:6.2f} {s.rows_per_s / ref:8.0%}"
        )
    print("* adaptive: the level it settled on (time-weighted median over the second half)")
    print()
    ok_best = adaptive.rows_per_s >= 0.9 * ref
    ok_seq = adaptive.rows_per_s >= 1.7 * seq.rows_per_s
    print(
        f"adaptive vs best fixed c={best_c} on the same rows: {adaptive.rows_per_s / ref:.0%} "
        f"(aim >= 90%: {'met' if ok_best else 'NOT met'}); vs that level's sweep sample: "
        f"{adaptive.rows_per_s / best.rows_per_s:.0%}"
    )
    print(
        f"adaptive vs sequential: {adaptive.rows_per_s / seq.rows_per_s:.2f}x (aim >= 1.7x: "
        f"{'met' if ok_seq else 'NOT met'})"
    )
    print("adaptive decisions:")
    for dec in adaptive.decisions:
        print(f"  {dec['t']:7.1f}s {dec['old']:>3} -> {dec['new']:<3} {dec['reason']}")


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--rows", type=int, default=500, help="rows of the adaptive and best-fixed runs")
    p.add_argument("--tokens", type=int, default=64, help="output tokens per row (EOS ignored)")
    p.add_argument(
        "--sample", type=int, default=64, help="rows per sweep level (at least 2x the level)"
    )
    p.add_argument("--sample-seq", type=int, default=24, help="rows of the sequential run")
    p.add_argument(
        "--levels", type=lambda s: [int(x) for x in s.split(",")], default=[2, 4, 8, 16, 32]
    )
    p.add_argument("--parallel", type=int, default=8, help="embedded engine slots")
    p.add_argument("--url", help="benchmark a running server instead of the embedded engine")
    p.add_argument("--model", help="model name for the rows (default: the server's first)")
    p.add_argument(
        "--quick", action="store_true", help="fewer rows and levels (< 60 s on a quiet box)"
    )
    args = p.parse_args()
    if args.quick:
        args.rows, args.tokens, args.sample, args.sample_seq = 64, 32, 24, 8
        args.levels = [4, 8, 16]
    with target(args) as url:
        asyncio.run(main_async(args, url))


if __name__ == "__main__":
    main()
