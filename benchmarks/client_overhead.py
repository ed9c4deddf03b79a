"""Client CPU cost per streamed chunk: infersight.client against a bare aiohttp loop.

The server is FakeOpenAI in its own process, so only the client's CPU is counted
(``time.process_time()`` of this process). Scenarios:

- ``burst``: itl=0, many tokens; several SSE events arrive per read (parser-bound).
- ``paced``: a small itl and several concurrent streams; about one event per read,
  as against a real engine (loop-wakeup bound).
- ``short``: 20-token answers, no pacing: per-request cost (the gateway's case).

Clients compared in one run:

- ``bare-aiohttp``: ``resp.content.iter_any()`` and nothing else (no parsing, no
  record): the floor any aiohttp client pays.
- ``bare+split``: the floor plus splitting events and ``orjson.loads`` per event.
- ``infersight``: ``Client.request`` with the full RequestRecord, retries, timeouts.
- ``is-events``: ``Client.stream`` + ``events()`` (one SSEEvent per event).
- ``is-raw``: ``Client.stream`` + ``raw_chunks()`` (passthrough, as the gateway uses).
- ``openai``: the official ``openai`` AsyncOpenAI client, for context (if installed).

    python benchmarks/client_overhead.py --quick
    python benchmarks/client_overhead.py --quick --baseline HEAD   # + an older client

``--baseline REV`` loads ``src/infersight/client`` as it was at git revision REV (a
private copy, imported under another name) and adds its ``Client.request`` and
``stream()+events()`` as ``base:request`` / ``base:events``: before/after in one run.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import importlib
import io
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from infersight_testkit import FakeConfig, FakeOpenAI

MSG = [{"role": "user", "content": "hello"}]
Runner = Callable[[str, int], Awaitable[int]]
Maker = Callable[[], Awaitable[tuple[Runner, Callable[[], Awaitable[None]]]]]


async def bare(session: aiohttp.ClientSession, url: str, tokens: int) -> int:
    body = {
        "messages": MSG,
        "max_tokens": tokens,
        "stream": True,
        "ignore_eos": True,
        "stream_options": {"include_usage": True},
    }
    n = 0
    async with session.post(
        url + "/v1/chat/completions",
        data=orjson.dumps(body),
        headers={"Content-Type": "application/json"},
    ) as resp:
        async for data in resp.content.iter_any():
            n += data.count(b"\n\n")
    return n


async def bare_split(session: aiohttp.ClientSession, url: str, tokens: int) -> int:
    body = {
        "messages": MSG,
        "max_tokens": tokens,
        "stream": True,
        "ignore_eos": True,
        "stream_options": {"include_usage": True},
    }
    n = 0
    buf = b""
    async with session.post(
        url + "/v1/chat/completions",
        data=orjson.dumps(body),
        headers={"Content-Type": "application/json"},
    ) as resp:
        async for data in resp.content.iter_any():
            buf += data
            *events, buf = buf.split(b"\n\n")
            for ev in events:
                payload = ev[6:]
                if payload != b"[DONE]":
                    orjson.loads(payload)
                    n += 1
    return n


async def measure_round(
    run: Runner, url: str, tokens: int, requests: int, concurrency: int
) -> tuple[int, float, float]:
    """One round: (chunks, client CPU seconds, wall seconds)."""
    chunks = 0
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for _ in range(max(1, requests // concurrency)):
        got = await asyncio.gather(*(run(url, tokens) for _ in range(concurrency)))
        chunks += sum(got)
    return chunks, time.process_time() - cpu0, time.perf_counter() - wall0


def load_baseline(rev: str) -> Any:
    """The client package at git revision ``rev``, imported as ``_baseline_client``."""
    root = Path(__file__).resolve().parent.parent
    tar = subprocess.run(
        ["git", "archive", rev, "src/infersight/client"], cwd=root, capture_output=True, check=True
    ).stdout
    dest = Path(tempfile.mkdtemp(prefix="infersight-baseline-"))
    atexit.register(shutil.rmtree, dest, True)
    pkg = dest / "_baseline_client"
    pkg.mkdir()
    with tarfile.open(fileobj=io.BytesIO(tar)) as tf:
        for m in tf.getmembers():
            f = tf.extractfile(m) if m.name.endswith(".py") else None
            if f is not None:
                text = f.read().decode().replace("infersight.client.", "_baseline_client.")
                text = text.replace("from infersight.client import", "from _baseline_client import")
                (pkg / Path(m.name).name).write_text(text)
    sys.path.insert(0, str(dest))
    return importlib.import_module("_baseline_client")


def stream_maker(mod: Any, raw: bool) -> Maker:
    """``Client.stream`` + ``events()`` (or ``raw_chunks()``) of client module ``mod``."""

    async def make() -> tuple[Runner, Callable[[], Awaitable[None]]]:
        held: dict[str, Any] = {}

        async def run(u: str, t: int) -> int:
            c = held.get(u)
            if c is None:
                c = held[u] = mod.Client(u, retry=mod.RetryPolicy.none(), timeouts=mod.Timeouts())
            body = {"messages": MSG, "max_tokens": t, "stream": True, "ignore_eos": True}
            async with c.stream("/v1/chat/completions", body) as sr:
                async for _x in sr.raw_chunks() if raw else sr.events():
                    pass
            return len(sr.record.chunk_times)

        async def close() -> None:
            for c in held.values():
                await c.close()

        return run, close

    return make


def request_maker(mod: Any) -> Maker:
    """``Client.request`` (via ``chat``) of client module ``mod``."""

    async def make() -> tuple[Runner, Callable[[], Awaitable[None]]]:
        held: dict[str, Any] = {}

        async def run(u: str, t: int) -> int:
            c = held.get(u)
            if c is None:
                c = held[u] = mod.Client(u, retry=mod.RetryPolicy.none(), timeouts=mod.Timeouts())
            done = await c.chat(MSG, max_tokens=t, ignore_eos=True)
            return len(done.record.chunk_times)

        async def close() -> None:
            for c in held.values():
                await c.close()

        return run, close

    return make


def makers(baseline: Any = None) -> dict[str, Maker]:
    async def m_bare() -> tuple[Runner, Callable[[], Awaitable[None]]]:
        s = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
        return (lambda u, t: bare(s, u, t)), s.close

    async def m_split() -> tuple[Runner, Callable[[], Awaitable[None]]]:
        s = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
        return (lambda u, t: bare_split(s, u, t)), s.close

    import infersight.client as current

    out: dict[str, Maker] = {"bare-aiohttp": m_bare, "bare+split": m_split}
    if baseline is not None:
        out["base:request"] = request_maker(baseline)
    out["infersight"] = request_maker(current)
    if baseline is not None:
        out["base:events"] = stream_maker(baseline, False)
    out["is-events"] = stream_maker(current, False)
    out["is-raw"] = stream_maker(current, True)
    try:
        import openai
    except ImportError:
        return out

    async def m_openai() -> tuple[Runner, Callable[[], Awaitable[None]]]:
        holder: dict[str, Any] = {}

        async def run(u: str, t: int) -> int:
            oc = holder.get(u)
            if oc is None:
                oc = holder[u] = openai.AsyncOpenAI(base_url=u + "/v1", api_key="x", max_retries=0)
            stream = await oc.chat.completions.create(
                model="fake",
                messages=MSG,
                max_tokens=t,
                stream=True,  # type: ignore[arg-type]
                extra_body={"ignore_eos": True},
            )
            n = 0
            async for ch in stream:  # type: ignore[union-attr]
                if ch.choices and ch.choices[0].delta.content:
                    n += 1
            return n

        async def close() -> None:
            for oc in holder.values():
                await oc.close()

        return run, close

    out["openai"] = m_openai
    return out


async def scenario(
    label: str,
    cfg: FakeConfig,
    tokens: int,
    requests: int,
    conc: int,
    rounds: int,
    only: list[str],
    baseline: Any,
) -> list[dict[str, Any]]:
    """Interleave the clients round by round (so load noise hits all alike); report
    the median round per client."""
    with FakeOpenAI.subprocess(cfg) as srv:
        opened = {}
        for name, make in makers(baseline).items():
            if only and name not in only:
                continue
            run, close = await make()
            await run(srv.base_url, 4)  # warm the pool and the code paths
            opened[name] = (run, close)
        per: dict[str, list[tuple[int, float, float]]] = {n: [] for n in opened}
        for _ in range(rounds):
            for name, (run, _close) in opened.items():
                per[name].append(await measure_round(run, srv.base_url, tokens, requests, conc))
        for _run, close in opened.values():
            await close()
    rows = []
    for name, results in per.items():
        us = sorted(cpu / n * 1e6 for n, cpu, _ in results)
        rows.append(
            {
                "scenario": label,
                "client": name,
                "chunks": sum(r[0] for r in results),
                "cpu_us": statistics.median(us),
                "cpu_us_min": us[0],
                "chunks_per_s": sum(r[0] for r in results) / sum(r[2] for r in results),
                "cpu_share": sum(r[1] for r in results) / sum(r[2] for r in results),
            }
        )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="finish in well under 60 s")
    ap.add_argument("--no-uvloop", action="store_true")
    ap.add_argument("--only", action="append", default=[], help="client name (repeatable)")
    ap.add_argument("--baseline", metavar="REV", help="also run the client of git revision REV")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds per scenario")
    args = ap.parse_args()
    baseline = load_baseline(args.baseline) if args.baseline else None
    if not args.no_uvloop:
        try:
            import uvloop

            uvloop.install()
        except ImportError:
            pass
    rounds = max(1, args.rounds)
    if args.quick:
        plan = [
            ("burst c=1", FakeConfig(itl=0.0), 2000, 2, 1),
            ("paced c=8", FakeConfig(itl=0.002), 200, 8, 8),
            ("short c=4", FakeConfig(itl=0.0, ttft=0.0), 20, 100, 4),
        ]
    else:
        plan = [
            ("burst c=1", FakeConfig(itl=0.0), 4000, 2, 1),
            ("burst c=8", FakeConfig(itl=0.0), 1000, 8, 8),
            ("paced c=8", FakeConfig(itl=0.002), 300, 8, 8),
            ("paced c=32", FakeConfig(itl=0.01), 100, 32, 32),
            ("short c=4", FakeConfig(itl=0.0, ttft=0.0), 20, 200, 4),
        ]
    loop = "asyncio" if args.no_uvloop else "uvloop"
    print(f"client CPU per streamed chunk (server: FakeOpenAI in its own process; loop: {loop})")
    print(f"CPU us/chunk: median (min) of {rounds} interleaved rounds; Ctrl-C keeps what is done")
    head = (
        f"{'scenario':<12} {'client':<14} {'chunks':>8} {'CPU us/chunk':>16} {'vs bare':>8} "
        f"{'chunks/s':>10} {'client CPU':>10}"
    )
    print(head)
    print("-" * len(head), flush=True)
    try:
        for label, cfg, tokens, requests, conc in plan:
            rows = asyncio.run(
                scenario(label, cfg, tokens, requests, conc, rounds, args.only, baseline)
            )
            base = next((r["cpu_us"] for r in rows if r["client"] == "bare-aiohttp"), None)
            for r in rows:
                rel = f"{r['cpu_us'] / base:>7.2f}x" if base else f"{'-':>8}"
                us = f"{r['cpu_us']:.1f} ({r['cpu_us_min']:.1f})"
                print(
                    f"{label:<12} {r['client']:<14} {r['chunks']:>8} {us:>16} {rel} "
                    f"{r['chunks_per_s']:>10.0f} {r['cpu_share'] * 100:>9.0f}%",
                    flush=True,
                )
    except KeyboardInterrupt:
        print("interrupted", flush=True)


if __name__ == "__main__":
    main()
