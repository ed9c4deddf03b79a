"""Fixture exporters for the fleet test: real HTTP servers on 127.0.0.1 that replay the
recorded expositions in ``fleet_fixtures/`` (vLLM V1, SGLang, dcgm-exporter) with the
values a scenario gives as functions of time since the server started.

A scenario sets gauges (``{series name: f(t)}``) and counters; every other counter and
every histogram series of the snapshot grows by ``growth`` of its recorded value per
second, so rates and ``histogram_quantile`` over them exist and keep their shape.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import web

FIX = Path(__file__).parent / "fleet_fixtures"
Fn = Callable[[float], float]


def _series_name(line: str) -> str:
    return line.split("{", 1)[0].split(" ", 1)[0]


def render(text: str, t: float, values: dict[str, Fn], growth: float) -> str:
    """The snapshot at ``t`` seconds: scenario values replace the recorded ones."""
    out = []
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            out.append(line)
            continue
        name = _series_name(line)
        head, value = line.rsplit(" ", 1)
        if name in values:
            line = f"{head} {values[name](t):.6g}"
        elif name.endswith(("_bucket", "_count", "_sum", "_total")):
            line = f"{head} {float(value) * (1.0 + growth * t):.9g}"
        out.append(line)
    return "\n".join(out) + "\n"


@dataclass
class Gpu:
    """One GPU in the dcgm-exporter snapshot: who uses it and its utilisation over time."""

    uuid: str
    host: str
    pod: str
    util_pct: Fn
    sm_active: Fn
    index: int = 0
    namespace: str = "llm"


def render_dcgm(text: str, t: float, gpus: list[Gpu]) -> str:
    """One block per GPU (the snapshot's labels rewritten), utilisation per scenario."""
    header = [ln for ln in text.splitlines() if ln.startswith("#")]
    samples = [ln for ln in text.splitlines() if ln and not ln.startswith("#")]
    out = [ln for ln in header if not ln.startswith(("# HELP", "# TYPE"))]
    for ln in header:
        if not ln.startswith(("# HELP", "# TYPE")):
            continue
        out.append(ln)
        if ln.startswith("# TYPE"):
            name = ln.split()[2]
            proto = next(s for s in samples if _series_name(s) == name)
            for g in gpus:
                line = (
                    proto.replace('gpu="0"', f'gpu="{g.index}"')
                    .replace("GPU-5c1f0a4e-8d2b-4f7e-9a61-0b3c2d4e5f60", g.uuid)
                    .replace('Hostname="gpu-node-1"', f'Hostname="{g.host}"')
                    .replace('pod="vllm-0"', f'pod="{g.pod}"')
                    .replace('container="vllm"', f'container="{"server" if g.pod else ""}"')
                    .replace('namespace="llm"', f'namespace="{g.namespace if g.pod else ""}"')
                )
                head = line.rsplit(" ", 1)[0]
                if name == "DCGM_FI_DEV_GPU_UTIL":
                    line = f"{head} {g.util_pct(t):.0f}"
                elif name == "DCGM_FI_PROF_SM_ACTIVE":
                    line = f"{head} {g.sm_active(t):.6f}"
                out.append(line)
    return "\n".join(out) + "\n"


@dataclass
class Replay:
    """A /metrics server: ``source(t)`` gives the body at ``t`` seconds since start."""

    source: Callable[[float], str]
    t0: float = field(default_factory=time.monotonic)
    runner: web.AppRunner | None = None
    port: int = 0
    hits: int = 0

    async def start(self) -> str:
        async def handle(_r: web.Request) -> web.Response:
            self.hits += 1
            body = self.source(time.monotonic() - self.t0)
            return web.Response(text=body, content_type="text/plain", charset="utf-8")

        app = web.Application()
        app.router.add_get("/metrics", handle)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", 0).start()
        self.port = self.runner.addresses[0][1]
        return f"127.0.0.1:{self.port}"

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()
