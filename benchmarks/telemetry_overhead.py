"""Telemetry overhead: what sampling costs, side by side, in one run.

Measures, per sample round:
  - host sampler (psutil: per-core CPU, memory, network, 2 watched processes): CPU ms;
  - engine scrapes (HTTP GET + parse + normalise) of a llama.cpp and a vLLM-sized
    /metrics served from another process, and of the live embedded engine (full run):
    CPU ms of this process and wall ms;
  - GPU sampler: NVML replay (the code path, no driver) and, where a GPU exists, real
    NVML against `nvidia-smi --query-gpu` run as a subprocess;
  - exporter scrape latency p50/p99 (exporter in its own process, keep-alive client).

    .venv/bin/python benchmarks/telemetry_overhead.py [--quick] [--url ENGINE_URL]
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from infersight.core.listen import free_port
from infersight.telemetry import EngineScraper, GpuSampler, HostSampler, ReplayBackend

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "tests" / "unit" / "telemetry" / "fixtures"
DATA = Path(str(resources.files("infersight.data").joinpath("telemetry")))

_SERVER = r"""
import sys
from aiohttp import web
texts = {}
for arg in sys.argv[2:]:
    name, path = arg.split("=", 1)
    texts[name] = open(path).read()
def handler(name):
    async def h(_r):
        return web.Response(text=texts[name])
    return h
app = web.Application()
for n in texts:
    app.router.add_get(f"/{n}/metrics", handler(n))
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=None)
"""


def _wait_http(port: int, path: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", path)
            if c.getresponse().status in (200, 503):
                return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"nothing answered on 127.0.0.1:{port}{path}")


def _row(name: str, cpu_ms: list[float], wall_ms: list[float] | None, note: str = "") -> list[str]:
    def f(xs: list[float] | None, q: float) -> str:
        return "-" if not xs else f"{np.percentile(xs, q):.2f}"

    return [
        name,
        str(len(cpu_ms or wall_ms or [])),
        f(cpu_ms, 50),
        f(cpu_ms, 99),
        f(wall_ms, 50),
        f(wall_ms, 99),
        note,
    ]


async def _measure(fn: Callable[[], Awaitable[Any]], n: int) -> tuple[list[float], list[float]]:
    cpu, wall = [], []
    await fn()  # warm: sessions, first-call priming
    for _ in range(n):
        c0, w0 = time.process_time(), time.perf_counter()
        await fn()
        cpu.append((time.process_time() - c0) * 1000)
        wall.append((time.perf_counter() - w0) * 1000)
    return cpu, wall


def _popen(argv: list[str], quiet: bool = False) -> subprocess.Popen[bytes]:
    return subprocess.Popen(argv, stderr=subprocess.DEVNULL if quiet else None)


def _nvidia_smi(n: int) -> list[float] | None:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    q = (
        "utilization.gpu,memory.used,memory.total,power.draw,power.limit,"
        "clocks.sm,clocks.mem,temperature.gpu"
    )
    wall = []
    for _ in range(n):
        t0 = time.perf_counter()
        subprocess.run(
            [exe, f"--query-gpu={q}", "--format=csv,noheader,nounits"],
            capture_output=True,
            check=True,
        )
        wall.append((time.perf_counter() - t0) * 1000)
    return wall


async def main(args: argparse.Namespace) -> None:
    n = 30 if args.quick else 200
    rows: list[list[str]] = []
    notes: list[str] = []

    busy = _popen([sys.executable, "-c", "import time; time.sleep(600)"])
    host = HostSampler({"self": os.getpid(), "other": busy.pid})
    cpu, wall = await _measure(host.sample, n)
    rows.append(_row("host (psutil)", cpu, wall, f"{os.cpu_count()} cores, 2 processes"))
    busy.kill()

    port = free_port()
    srv = _popen(
        [
            sys.executable,
            "-c",
            _SERVER,
            str(port),
            f"llamacpp={FIX / 'llamacpp_xllamacpp_2026.txt'}",
            f"vllm={FIX / 'vllm_v0_11.txt'}",
        ]
    )
    engine_ctx: Any = None
    try:
        _wait_http(port, "/vllm/metrics")
        for name in ("llamacpp", "vllm"):
            sc = EngineScraper(f"http://127.0.0.1:{port}/{name}/metrics")
            size = len(
                (
                    FIX
                    / ("llamacpp_xllamacpp_2026.txt" if name == "llamacpp" else "vllm_v0_11.txt")
                ).read_bytes()
            )
            cpu, wall = await _measure(sc.sample, n)
            rows.append(_row(f"engine scrape: {name} text", cpu, wall, f"{size} B /metrics"))
            await sc.close()
        url = args.url
        if url is None and not args.quick:
            from infersight.engine import EmbeddedEngine

            engine_ctx = EmbeddedEngine(parallel=8, ctx=8192)
            engine_ctx.start()
            url = engine_ctx.base_url
        if url:
            sc = EngineScraper(url)
            cpu, wall = await _measure(sc.sample, n)
            rows.append(_row(f"engine scrape: live {sc.engine}", cpu, wall, url))
            await sc.close()
        else:
            notes.append("live engine scrape skipped in --quick (pass --url to include one)")

        g = GpuSampler(ReplayBackend(DATA / "nvml_replay_h100_a100.json"))
        cpu, wall = await _measure(g.sample, n)
        rows.append(_row("GPU: NVML replay (2 GPUs)", cpu, wall, "code path only, no driver"))
        real = GpuSampler()
        if await real.sample():
            cpu, wall = await _measure(real.sample, n)
            rows.append(_row("GPU: real NVML", cpu, wall, f"{len(real.describe())} GPU(s)"))
            smi = _nvidia_smi(min(n, 30))
            if smi:
                rows.append(_row("GPU: nvidia-smi --query-gpu", [], smi, "subprocess per round"))
        else:
            notes.append(f"real NVML vs nvidia-smi skipped: {real.unavailable_reason}")
        await real.close()

        # exporter in its own process, scraping the fixture vLLM and llama.cpp servers
        eport = free_port()
        exp = _popen(
            [
                sys.executable,
                "-c",
                "from infersight.cli import main; main()",
                "exporter",
                "--port",
                str(eport),
                "--no-gpu",
                "--interval",
                "1",
                f"http://127.0.0.1:{port}/vllm/metrics",
                f"http://127.0.0.1:{port}/llamacpp/metrics",
            ],
            quiet=True,
        )
        try:
            _wait_http(eport, "/metrics")
            await asyncio.sleep(2.5)  # two rounds: interval quantiles present
            conn = http.client.HTTPConnection("127.0.0.1", eport, timeout=5)
            lat, size = [], 0
            for _ in range(n * 2):
                t0 = time.perf_counter()
                conn.request("GET", "/metrics")
                body = conn.getresponse().read()
                lat.append((time.perf_counter() - t0) * 1000)
                size = len(body)
            rows.append(_row("exporter /metrics scrape", [], lat, f"{size} B, own process"))
        finally:
            exp.terminate()
            exp.wait(10)
    finally:
        srv.terminate()
        srv.wait(10)
        if engine_ctx is not None:
            engine_ctx.stop()

    from rich.console import Console
    from rich.table import Table

    t = Table(title="infersight telemetry overhead (per round)")
    for col in ("what", "rounds", "CPU ms p50", "CPU ms p99", "wall ms p50", "wall ms p99", "note"):
        t.add_column(col, justify="right" if "ms" in col or col == "rounds" else "left")
    for r in rows:
        t.add_row(*r)
    c = Console(width=max(Console().width, 120))
    c.print(t)
    for note in notes:
        c.print(f"note: {note}")


if __name__ == "__main__":
    import logging

    logging.getLogger("infersight.telemetry").setLevel(logging.ERROR)  # the table says it
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--quick", action="store_true", help="fewer rounds, no embedded engine (< 60 s)")
    p.add_argument(
        "--url", help="also scrape this engine (default in a full run: start the embedded one)"
    )
    asyncio.run(main(p.parse_args()))
