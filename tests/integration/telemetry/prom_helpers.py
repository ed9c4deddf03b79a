"""Helpers for tests that run a real Prometheus (the ``prometheus_factory`` fixture of
this directory's conftest starts it): its HTTP API, and a free port."""

from __future__ import annotations

import asyncio
import math
import time
from importlib import resources
from pathlib import Path
from typing import Any

import aiohttp

DATA = Path(str(resources.files("infersight.data").joinpath("telemetry")))


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
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                result = await self.query_once(session, q)
            except (aiohttp.ClientError, AssertionError):
                result = []  # Prometheus is still starting
            if result and (not finite or has_finite(result)):
                return result
            await asyncio.sleep(0.5)
        raise AssertionError(f"Prometheus never returned a result for {q!r}")


def has_finite(result: list[Any]) -> bool:
    """True when an instant-query result holds a finite number (NaN/Inf draw nothing)."""
    return any(math.isfinite(float(r["value"][1])) for r in result)
