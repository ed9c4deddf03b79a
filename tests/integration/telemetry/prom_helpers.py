"""Helpers for tests that run a real Prometheus (the ``prometheus_factory`` fixture of
this directory's conftest starts it): its HTTP API, an ``infersight exporter`` for it
to scrape, chat load to give the engines' rates something to move, and the check that
the dashboard's engine panels have data where the engine has the signal."""

from __future__ import annotations

import asyncio
import math
import os
import subprocess
import sys
from importlib import resources
from pathlib import Path
from typing import Any

import aiohttp

from infersight.telemetry.dashboards import dashboard_panels, panel_engines, sample_names
from support.waiting import until_awaited

DATA = Path(str(resources.files("infersight.data").joinpath("telemetry")))
CLI = [sys.executable, "-c", "from infersight.cli import main; main()"]
#: What Grafana's $__rate_interval becomes here (4 scrape intervals and some margin).
RATE = "15s"
#: Bound of the load loops (they stop when the test sets their event, well before).
MAX_REQUESTS = 5000
#: Seconds between queries while waiting for Prometheus: it scrapes every 0.5 s, so
#: asking more often finds nothing new.
POLL = 0.5


class Prometheus:
    """A running Prometheus and its HTTP API."""

    def __init__(self, url: str) -> None:
        self.url = url

    async def query_once(self, session: aiohttp.ClientSession, q: str) -> list[Any]:
        """One instant query; its result (raises on a PromQL error)."""
        async with session.get(f"{self.url}/api/v1/query", params={"query": q}) as r:
            doc = await r.json()
        assert doc.get("status") == "success", (q, doc)
        return list(doc["data"]["result"])

    async def query(
        self, session: aiohttp.ClientSession, q: str, timeout: float = 60, finite: bool = False
    ) -> list[Any]:
        """Poll until the query returns series (with a finite value when ``finite``)."""

        async def look() -> list[Any]:
            try:
                result = await self.query_once(session, q)
            except (aiohttp.ClientError, AssertionError):
                return []  # Prometheus is still starting
            return result if result and (not finite or has_finite(result)) else []

        return await until_awaited(look, f"Prometheus to return a result for {q!r}", timeout, POLL)


def has_finite(result: list[Any]) -> bool:
    """True when an instant-query result holds a finite number (NaN/Inf draw nothing)."""
    return any(math.isfinite(float(r["value"][1])) for r in result)


def expr(e: str, *, instance: str = ".*", source: str = ".*") -> str:
    """A dashboard expression with Grafana's variables filled in."""
    return (
        e.replace("$__rate_interval", RATE)
        .replace("$instance", instance)
        .replace("$source", source)
    )


async def load(
    url: str,
    model: str,
    stop: asyncio.Event,
    *,
    key: str | None,
    fail_every: int = 0,
    concurrency: int = 3,
    stream: bool = False,
) -> None:
    """Chat requests until ``stop`` (bounded); every ``fail_every``-th one fails."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    sent = 0

    async def worker(session: aiohttp.ClientSession, w: int) -> None:
        nonlocal sent
        while not stop.is_set() and sent < MAX_REQUESTS:
            sent += 1
            body = {
                "model": model,
                "max_tokens": 8,
                "temperature": 0,
                "stream": stream,
                "messages": [{"role": "user", "content": f"Count to {sent} ({w})."}],
            }
            extra = {}
            if fail_every and sent % fail_every == 0:
                # a fake engine answers 503; the gateway refuses the unknown model
                extra = {"X-Fake-Behavior": "503"}
                body["model"] = "no-such-model"
            try:
                async with session.post(
                    f"{url}/v1/chat/completions", json=body, headers=extra
                ) as r:
                    await r.read()
            except (aiohttp.ClientError, TimeoutError):
                # counted in ``sent``: a server that keeps failing ends the load (and
                # the panels it should have filled say so), it is not retried forever
                continue

    timeout = aiohttp.ClientTimeout(total=60)
    async with aiohttp.ClientSession(headers=headers, timeout=timeout) as session:
        await asyncio.gather(*(worker(session, w) for w in range(concurrency)))


def cli_exporter(urls: list[str], port: int, key: str | None, pid: int) -> subprocess.Popen[str]:
    """``infersight exporter`` over ``urls`` on ``port``, watching process ``pid``."""
    env = {**os.environ, "INFERSIGHT_TEST_ENGINE_KEY": key or ""}
    args = [
        "exporter",
        *urls,
        "--port",
        str(port),
        "--interval",
        "0.5",
        "--no-gpu",
        "--process",
        f"engine={pid}",
    ]
    if key:
        args += ["--api-key-env", "INFERSIGHT_TEST_ENGINE_KEY"]
    return subprocess.Popen([*CLI, *args], env=env, stderr=subprocess.PIPE, text=True)


def engine_targets(panel: dict[str, Any]) -> list[str]:
    """The panel's expressions that read an engine's samples."""
    return [
        t["expr"]
        for t in panel.get("targets", [])
        if any(n.startswith("engine.") for n in sample_names(t["expr"]))
    ]


async def check_engine_panels(
    prom: Prometheus, s: aiohttp.ClientSession, sources: dict[str, tuple[str, str]]
) -> dict[str, list[str]]:
    """For each source: the panels with data (asserting the derived table)."""
    filled: dict[str, list[str]] = {}
    panels = [p for p in dashboard_panels() if engine_targets(p)]
    assert len(panels) >= 12
    for name, (engine, source) in sources.items():
        filled[name] = []
        for p in panels:
            exprs = [expr(e, source=source) for e in engine_targets(p)]
            if engine in panel_engines(p):
                # has the signal: data within the time load needs to move a rate

                async def any_finite(exprs: list[str] = exprs) -> bool:
                    results = await asyncio.gather(*(prom.query_once(s, e) for e in exprs))
                    return any(map(has_finite, results))

                await until_awaited(any_finite, f"{p['title']!r} to have data for {name}", 60, POLL)
                filled[name].append(p["title"])
            else:
                for e in exprs:
                    r = await prom.query_once(s, e)
                    assert not has_finite(r), f"{p['title']!r} has data for {name}: {e} -> {r}"
    return filled
