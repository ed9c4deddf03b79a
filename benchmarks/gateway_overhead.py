"""What latency does the gateway add, and how many req/s does one gateway process serve?

Side by side in one run, against a fast fake upstream on 127.0.0.1 (FakeOpenAI in its
own process, no generation delay):

- added latency p50/p99 at fixed open-loop rates (200 and 500 req/s), non-streamed and
  streamed: the same load goes direct to the upstream and through the gateway, in
  alternating blocks so drift on a shared machine hits both alike;
- the maximum req/s of one gateway process (closed loop, many concurrent clients),
  with the gateway's CPU use so you can see it was the bottleneck;
- optionally the same for LiteLLM's proxy (``--litellm``): installed on demand into
  ``.bench-venvs/litellm`` (one worker, no database); skipped with a note if the
  install or start fails.

    python benchmarks/gateway_overhead.py --quick        # < 60 s
    python benchmarks/gateway_overhead.py --litellm      # full run + LiteLLM
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import numpy as np
import orjson
import psutil

from infersight.testing.fake_openai import FakeConfig, FakeOpenAI

ROOT = Path(__file__).resolve().parent.parent
PAYLOAD = {"model": "fake", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 16}


@dataclass
class Target:
    name: str
    url: str
    pid: int | None = None
    model: str = "fake"
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Sample:
    lat: list[float] = field(default_factory=list)
    errors: int = 0


# -- servers --------------------------------------------------------------------------------
@contextlib.contextmanager
def gateway_process(upstream: str, *extra: str, env: dict[str, str] | None = None
                    ) -> Iterator[Target]:
    """`infersight gateway` in its own process; access log on (to a file), as deployed."""
    fd, log_name = tempfile.mkstemp(suffix=".log")
    log = os.fdopen(fd, "w")
    cmd = [sys.executable, "-c", "from infersight.cli import main; main()", "gateway",
           "--upstream", f"up={upstream},models=fake,concurrency=4096,queue=8192",
           "--port", "0", *extra]
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})})
    try:
        url = None
        deadline = time.monotonic() + 60
        while url is None and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
            text = Path(log_name).read_text()
            if "listening on " in text:
                url = text.split("listening on ")[1].split()[0]
        if url is None:
            raise RuntimeError(f"gateway did not start: {Path(log_name).read_text()[-500:]}")
        yield Target("infersight", url, proc.pid)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
        os.unlink(log_name)


# ---- LiteLLM hook (benchmark-only venv; one worker, no database) -------------------------
LITELLM_VENV = ROOT / ".bench-venvs" / "litellm"


def _litellm_ready() -> Path | None:
    """Create the venv and install LiteLLM's proxy on first use; None (with a note) on failure."""
    exe = LITELLM_VENV / "bin" / "litellm"
    if exe.exists():
        return exe
    print(f"installing litellm[proxy] into {LITELLM_VENV} (one time)...", flush=True)
    try:
        subprocess.run([sys.executable, "-m", "venv", str(LITELLM_VENV)], check=True)
        subprocess.run([str(LITELLM_VENV / "bin" / "pip"), "install", "-q", "litellm[proxy]"],
                       check=True, timeout=900)
    except (subprocess.SubprocessError, OSError) as e:
        print(f"note: LiteLLM install failed ({e}); skipping the LiteLLM comparison")
        return None
    return exe if exe.exists() else None


@contextlib.contextmanager
def litellm_process(upstream: str) -> Iterator[Target | None]:
    exe = _litellm_ready()
    if exe is None:
        yield None
        return
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    tmp = Path(tempfile.mkdtemp())
    cfg = tmp / "litellm.yaml"
    cfg.write_text(
        "model_list:\n  - model_name: fake\n    litellm_params:\n"
        f"      model: openai/fake\n      api_base: {upstream}/v1\n      api_key: sk-bench\n"
        "litellm_settings:\n  drop_params: true\n  set_verbose: false\n"
    )
    import secrets

    master = "sk-bench-" + secrets.token_hex(16)  # the proxy refuses to start without one
    env = {**os.environ, "LITELLM_LOG": "ERROR", "DISABLE_SCHEMA_UPDATE": "true",
           "LITELLM_MASTER_KEY": master}
    env.pop("DATABASE_URL", None)
    proc = subprocess.Popen(
        [str(exe), "--config", str(cfg), "--host", "127.0.0.1", "--port", str(port),
         "--num_workers", "1"],
        stdout=subprocess.DEVNULL, stderr=(tmp / "err.log").open("w"), env=env,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        import urllib.request

        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(url + "/health/liveliness", timeout=2):
                    break
            except OSError:
                time.sleep(0.5)
        else:
            print("note: LiteLLM proxy did not start; skipping it "
                  f"({(tmp / 'err.log').read_text()[-300:]})")
            yield None
            return
        yield Target("litellm", url, proc.pid, headers={"Authorization": f"Bearer {master}"})
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


# -- load ------------------------------------------------------------------------------------
async def one(session: aiohttp.ClientSession, t: Target, stream: bool, out: Sample) -> None:
    body = orjson.dumps({**PAYLOAD, "model": t.model, "stream": stream})
    t0 = time.perf_counter()
    try:
        async with session.post(t.url + "/v1/chat/completions", data=body,
                                headers={"Content-Type": "application/json", **t.headers}) as r:
            if stream:
                async for _ in r.content.iter_any():
                    pass
            else:
                await r.read()
            ok = r.status == 200
    except aiohttp.ClientError:
        ok = False
    if ok:
        out.lat.append(time.perf_counter() - t0)
    else:
        out.errors += 1


async def open_loop(session: aiohttp.ClientSession, t: Target, rate: float, seconds: float,
                    stream: bool, out: Sample) -> None:
    """Send at fixed times (rate/s) regardless of answers; await all at the end."""
    loop = asyncio.get_running_loop()
    n = int(rate * seconds)
    start = loop.time() + 0.01
    tasks = []
    for i in range(n):
        delay = start + i / rate - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.ensure_future(one(session, t, stream, out)))
    await asyncio.gather(*tasks)


async def closed_loop(t: Target, concurrency: int, seconds: float) -> tuple[float, float | None]:
    """Max req/s with ``concurrency`` clients; also the target process's CPU % (100 = a core)."""
    out = Sample()
    proc = psutil.Process(t.pid) if t.pid else None
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        await asyncio.gather(*(one(session, t, False, out) for _ in range(concurrency)))  # warm
        out = Sample()
        stop = time.perf_counter() + seconds
        if proc:
            proc.cpu_percent(None)

        async def worker() -> None:
            while time.perf_counter() < stop:
                await one(session, t, False, out)

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        took = time.perf_counter() - t0
        cpu = proc.cpu_percent(None) if proc else None
    return len(out.lat) / took, cpu


async def rate_compare(targets: list[Target], rate: float, stream: bool, seconds: float,
                       blocks: int) -> dict[str, Sample]:
    res = {t.name: Sample() for t in targets}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        for t in targets:  # warm the connection pools
            await open_loop(session, t, rate, 0.3, stream, Sample())
        for _ in range(blocks):
            for t in targets:
                await open_loop(session, t, rate, seconds / blocks, stream, res[t.name])
    return res


async def embed_loop(t: Target, concurrency: int, seconds: float) -> tuple[float, float]:
    """Closed-loop embeddings (one input each): req/s and p50 latency (ms)."""
    lat: list[float] = []
    body = orjson.dumps({"model": "fake", "input": "some text to embed"})
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        stop = time.perf_counter() + seconds

        async def worker() -> None:
            while time.perf_counter() < stop:
                t0 = time.perf_counter()
                async with session.post(t.url + "/v1/embeddings", data=body,
                                        headers={"Content-Type": "application/json"}) as r:
                    await r.read()
                    if r.status == 200:
                        lat.append(time.perf_counter() - t0)

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return len(lat) / (time.perf_counter() - t0), pct(lat, 50)


def batching_gain(seconds: float, concurrency: int) -> None:
    """Embeddings through the gateway with and without dynamic batching.

    The fake upstream costs 5 ms per call + 0.2 ms per input, a fixed per-call cost
    like a real embedding server's (one forward pass, one HTTP exchange)."""
    cfg = FakeConfig(embed_base=0.005, embed_per_item=0.0002)
    print(f"\nbatching gain (embeddings, {concurrency} concurrent clients, upstream 5 ms/call "
          "+ 0.2 ms/input):")
    with FakeOpenAI.subprocess(cfg) as fake:
        for label, env in (("batching off", '{"enabled": false}'),
                           ("batching on ", '{"max_batch_size": 64, "max_wait_ms": 2}')):
            with gateway_process(fake.base_url, env={"INFERSIGHT_GATEWAY_BATCH": env}) as gw:
                fake.reset()
                rps, p50 = asyncio.run(embed_loop(gw, concurrency, seconds))
                calls = fake.stats()["by_path"].get("/v1/embeddings", 0)
                print(f"  {label}  {rps:>8.0f} req/s   p50 {p50:>8.2f} ms   "
                      f"upstream calls {calls}")


def pct(v: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(v), q)) * 1000.0 if v else float("nan")


# -- main ---------------------------------------------------------------------------------------
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="short run (< 60 s)")
    ap.add_argument("--rates", default="200,500")
    ap.add_argument("--seconds", type=float, default=None, help="seconds per rate and target")
    ap.add_argument("--concurrency", type=int, default=64, help="clients for the max req/s run")
    ap.add_argument("--litellm", action="store_true",
                    help="also measure LiteLLM's proxy (installs it into .bench-venvs/litellm)")
    ap.add_argument("--litellm-rate", type=float, default=20.0,
                    help="an extra, low rate that LiteLLM's single worker can hold")
    args = ap.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[attr-defined]
    seconds = args.seconds or (2.0 if args.quick else 10.0)
    max_seconds = 3.0 if args.quick else 10.0
    rates = [float(r) for r in args.rates.split(",")]
    if args.litellm and args.litellm_rate not in rates:
        rates.insert(0, args.litellm_rate)
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass

    with contextlib.ExitStack() as stack:
        fake = stack.enter_context(FakeOpenAI.subprocess(FakeConfig(ttft=0.0, itl=0.0, tokens=16)))
        direct = Target("direct", fake.base_url, fake.pid)
        gw = stack.enter_context(gateway_process(fake.base_url))
        targets = [direct, gw]
        if args.litellm:
            lt = stack.enter_context(litellm_process(fake.base_url))
            if lt is not None:
                targets.append(lt)
        print(f"upstream: FakeOpenAI (16 tokens, no delay) at {fake.base_url}; "
              f"{seconds:g} s per rate and target, alternating blocks; "
              f"{os.cpu_count()} CPUs, load avg {os.getloadavg()[0]:.1f}\n")
        hdr = f"{'mode':<7}{'rate':>6}  {'target':<11}{'p50 ms':>10}{'p99 ms':>10}" \
              f"{'added p50':>11}{'added p99':>11}{'errors':>8}{'n':>7}"
        print(hdr)
        print("-" * len(hdr))
        for stream in (False, True):
            for rate in rates:
                res = asyncio.run(rate_compare(targets, rate, stream, seconds,
                                               blocks=2 if args.quick else 4))
                base = res["direct"].lat
                for t in targets:
                    s = res[t.name]
                    add50 = pct(s.lat, 50) - pct(base, 50)
                    add99 = pct(s.lat, 99) - pct(base, 99)
                    added = (f"{add50:>11.3f}{add99:>11.3f}" if t.name != "direct"
                             else f"{'':>11}{'':>11}")
                    print(f"{'stream' if stream else 'json':<7}{rate:>6.0f}  {t.name:<11}"
                          f"{pct(s.lat, 50):>10.3f}{pct(s.lat, 99):>10.3f}{added}"
                          f"{s.errors:>8}{len(s.lat):>7}")
        print(f"\nmax req/s (non-streamed, {args.concurrency} concurrent clients, "
              f"{max_seconds:g} s; CPU % of the serving process, 100 = one core):")
        for t in targets:
            rps, cpu = asyncio.run(closed_loop(t, args.concurrency, max_seconds))
            cpu_s = f"{cpu:.0f}%" if cpu is not None else "-"
            print(f"  {t.name:<11}{rps:>9.0f} req/s   cpu {cpu_s}")
    batching_gain(max_seconds, args.concurrency)
    print("\nnote: on a shared machine the load generator competes with both servers; "
          "the lead re-runs this on a quiet one.")


if __name__ == "__main__":
    main()
