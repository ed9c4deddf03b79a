"""Do the gateway and batch need different adaptive-concurrency laws? Swap them and see.

The two laws they had (see ``_controller_swap.py``): ``batch`` (throughput-seeking, in
measurement windows; now ``infersight.control``, shared by both) and ``gradient`` (the
gateway's former per-sample latency-gradient law). Each runs in both situations, side
by side in one run, on 127.0.0.1 against the fake OpenAI server in its own process
(``FakeOpenAI.subprocess``):

- **batch's situation**: a backlog of rows (``run_batch_async``, the batch's defaults)
  against an API that answers 429 with ``Retry-After: 1`` above 6 requests in flight
  (a hosted API's concurrency limit), then against an engine with 8 slots and a FIFO
  queue. Figures: rows/s and 429s per 100 attempts.
- **gateway's situation**: ``infersight gateway`` with an adaptive limit starting at the
  configured 32, in front of an engine with 8 slots (about 0.2 s per answer, 40/s at
  most); interactive clients arrive at random (Poisson) at ``--rate`` per second, first
  each with a deadline (``X-Infersight-Deadline-Ms``), then with none, then streamed
  with a deadline (the gateway's limit then learns from the time to first content), then
  with none but an upstream first-byte limit of the same length. Figures:
  goodput (whole answers within the deadline per second), latency p50/p99 of the answers,
  503/504 answers, streams the deadline cut after content, and the median limit the law
  held.

Only the law is swapped: the batch runner's Retry-After pause and the gateway's queue,
deadline shedding and metrics stay as they are.

    python benchmarks/adaptive_controllers.py            # about 6 minutes
    python benchmarks/adaptive_controllers.py --quick    # about 3 minutes
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import logging
import random
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np

import infersight.batch.api as batch_api
import infersight.gateway.upstream as gw_upstream
from _controller_swap import GradientForBatch, GradientLimit
from infersight.batch import BatchConfig, run_batch_async
from infersight.gateway import Gateway, load_config
from infersight.gateway.limiter import Limiter
from infersight_testkit import FakeConfig, FakeOpenAI

Row = dict[str, Any]
CHAT = {"model": "fake", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 16}


@contextlib.contextmanager
def patched(obj: Any, name: str, value: Any) -> Iterator[None]:
    old = getattr(obj, name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        setattr(obj, name, old)


# -- batch's situation ---------------------------------------------------------------
def gradient_controller(cfg: BatchConfig, now: float) -> GradientForBatch:
    return GradientForBatch(
        now=now,
        initial=cfg.start_concurrency,
        minimum=cfg.min_concurrency,
        maximum=cfg.max_concurrency,
    )


async def batch_run(fake: FakeConfig, law: str, rows: int, tmp: Path) -> Row:
    inp, out = tmp / f"{law}.in.jsonl", tmp / f"{law}.out.jsonl"
    out.unlink(missing_ok=True)
    with inp.open("w") as f:
        for i in range(rows):
            body = {"messages": [{"role": "user", "content": f"row {i}"}], "max_tokens": 8}
            line = {"custom_id": f"r{i}", "method": "POST", "url": "/v1/chat/completions"}
            f.write(json.dumps({**line, "body": body}) + "\n")
    cfg = BatchConfig(input=inp, output=out, quiet=True, fsync=False)
    swap = gradient_controller if law == "gradient" else batch_api._controller
    with FakeOpenAI.subprocess(fake) as srv, patched(batch_api, "_controller", swap):
        s = await run_batch_async(dataclasses.replace(cfg, url=srv.base_url))
        stats = srv.stats()
    rejected = stats["statuses"].get("429", 0)
    return {
        "law": law,
        "rows/s": s.rows_per_s,
        "429 per 100": 100.0 * rejected / max(1, stats["requests"]),
        "settled": s.concurrency_settled,
        "failed": s.failed,
    }


# -- gateway's situation -------------------------------------------------------------
#: The status recorded for a stream cut short (by its deadline) after content.
CUT = -1


async def one_request(
    session: aiohttp.ClientSession,
    url: str,
    deadline_ms: int | None,
    stream: bool,
    out: list[tuple[int, float]],
) -> None:
    t = time.monotonic()
    headers = {"X-Infersight-Deadline-Ms": str(deadline_ms)} if deadline_ms else {}
    body = {**CHAT, "stream": stream}
    try:
        async with session.post(url + "/v1/chat/completions", json=body, headers=headers) as r:
            data = await r.read()
            # A stream its deadline ended is a 200 that ends in an error event: no answer.
            cut = r.status == 200 and stream and b'"error"' in data
            out.append((CUT if cut else r.status, time.monotonic() - t))
    except aiohttp.ClientError:
        out.append((0, time.monotonic() - t))


async def gateway_run(
    fake: FakeConfig,
    law: str,
    args: argparse.Namespace,
    deadline_ms: int | None,
    stream: bool,
    first_byte_ms: int | None = None,
) -> Row:
    stock = gw_upstream.make_limiter

    def limiter(kind: str, initial: int, lo: int = 1, hi: int = 1024) -> Limiter:
        return GradientLimit(initial, lo, hi) if law == "gradient" else stock(kind, initial, lo, hi)

    up: dict[str, Any] = {"name": "a", "models": ["fake"], "limiter": "gradient", "concurrency": 32}
    if first_byte_ms:
        up["ttft_timeout_s"] = up["first_byte_timeout_s"] = first_byte_ms / 1000.0
    out: list[tuple[int, float]] = []
    limits: list[int] = []
    with FakeOpenAI.subprocess(fake) as srv, patched(gw_upstream, "make_limiter", limiter):
        cfg = load_config(None, port=0, upstreams=[{**up, "url": srv.base_url}])
        async with Gateway(cfg).running() as gw, aiohttp.ClientSession() as session:
            rng = random.Random(args.seed)
            tasks: list[asyncio.Task[None]] = []
            t0 = time.monotonic()
            nxt = t0
            while nxt < t0 + args.seconds:
                await asyncio.sleep(max(0.0, nxt - time.monotonic()))
                call = one_request(session, gw.url, deadline_ms, stream, out)
                tasks.append(asyncio.create_task(call))
                limits.append(gw.upstreams[0].admission.limit)
                nxt += rng.expovariate(args.rate)
            await asyncio.gather(*tasks)
            wall = time.monotonic() - t0
    ok = [lat for st, lat in out if st == 200]
    good = [lat for lat in ok if deadline_ms is None or lat <= deadline_ms / 1000.0]
    return {
        "law": law,
        "goodput/s": len(good) / wall,
        "p50 ms": 1000.0 * float(np.percentile(ok, 50)) if ok else float("nan"),
        "p99 ms": 1000.0 * float(np.percentile(ok, 99)) if ok else float("nan"),
        "503": sum(1 for st, _ in out if st == 503),
        "504": sum(1 for st, _ in out if st == 504),
        "cut": sum(1 for st, _ in out if st == CUT),
        "limit p50": float(np.median(limits)) if limits else float("nan"),
    }


# -- report ----------------------------------------------------------------------------
def table(title: str, rows: list[Row]) -> None:
    print(f"\n{title}")
    keys = list(rows[0])
    print("  " + "".join(f"{k:>13}" for k in keys))
    for r in rows:
        cells = (f"{v:13.1f}" if isinstance(v, float) else f"{v!s:>13}" for v in r.values())
        print("  " + "".join(cells))


def gap(rows: list[Row], key: str, higher_better: bool) -> str:
    own, other = rows[0][key], rows[1][key]
    worse = (own - other) / own if higher_better else (other - own) / max(own, 1e-9)
    return f"{key}: gradient {worse:+.0%} worse"


async def main_async(args: argparse.Namespace) -> None:
    limited = FakeConfig(ttft=0.04, itl=0.01, tokens=8, max_concurrency=6)
    slotted = FakeConfig(ttft=0.04, itl=0.01, tokens=8, slots=8)
    engine = FakeConfig(ttft=0.05, itl=0.01, tokens=16, slots=8)
    with tempfile.TemporaryDirectory(prefix="adaptive-bench-") as d:
        tmp = Path(d)
        rate_limited = [await batch_run(limited, law, args.rows, tmp) for law in LAWS]
        slot_bound = [await batch_run(slotted, law, args.rows, tmp) for law in LAWS]
    ms = args.deadline_ms
    # (deadline, streamed, first-byte limit): the last case holds no request to a
    # deadline but gives the upstream a first-byte limit of the same length
    cases = ((ms, False, None), (None, False, None), (ms, True, None), (None, False, ms))
    gateway = {
        case: [await gateway_run(engine, law, args, case[0], case[1], case[2]) for law in LAWS]
        for case in cases
    }
    table("batch's situation: rows against an API with a 429 limit at 6 in flight", rate_limited)
    print("  " + gap(rate_limited, "rows/s", True) + "; " + gap(rate_limited, "429 per 100", False))
    table("batch's situation: rows against an engine with 8 slots", slot_bound)
    print("  " + gap(slot_bound, "rows/s", True))
    for (deadline, stream, first_byte), rows in gateway.items():
        limit = (
            f"{deadline} ms deadline"
            if deadline
            else f"no deadline, {first_byte} ms first-byte limit"
            if first_byte
            else "no deadline"
        )
        table(
            f"gateway's situation: {args.rate:g} {'streamed ' if stream else ''}req/s at random, "
            f"{limit}, engine with 8 slots (40 answers/s at most)",
            rows,
        )
        print("  " + gap(rows, "goodput/s", True) + "; " + gap(rows, "p99 ms", False))
    print("\n(batch: the shared law both features run now; gradient: the gateway's former law)")


LAWS = ("batch", "gradient")


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--rows", type=int, default=600, help="rows of each batch run")
    p.add_argument("--rate", type=float, default=48.0, help="gateway clients per second")
    p.add_argument("--seconds", type=float, default=30.0, help="length of each gateway run")
    p.add_argument("--deadline-ms", type=int, default=1000, help="each gateway request's deadline")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--quick", action="store_true", help="fewer rows, shorter gateway runs")
    args = p.parse_args()
    if args.quick:
        args.rows, args.seconds = 300, 15.0
    # The gateway's warnings (deadlines passed, circuit changes) would bury the tables.
    logging.getLogger("infersight.gateway").setLevel(logging.ERROR)
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
