"""Requests beyond the slots wait in llama.cpp's own queue, where /metrics can see them."""

from __future__ import annotations

import asyncio
import urllib.request

import pytest

from infersight.client import Client
from infersight.engine import EmbeddedEngine
from support.waiting import until_awaited

pytestmark = pytest.mark.engine


def _metric(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} missing from /metrics")


async def test_waiting_requests_show_as_deferred() -> None:
    with EmbeddedEngine(parallel=1, ctx=512) as eng:
        async with Client(eng.base_url) as client:
            body = {"role": "user", "content": "Count to one hundred."}
            tasks = [
                asyncio.create_task(client.chat([body], max_tokens=400, ignore_eos=True))
                for _ in range(4)
            ]
            try:

                async def one_busy_three_deferred() -> bool:
                    text = await asyncio.to_thread(_scrape, eng.base_url)
                    seen = (
                        _metric(text, "llamacpp:requests_processing"),
                        _metric(text, "llamacpp:requests_deferred"),
                    )
                    return seen == (1.0, 3.0)

                # One slot busy, the other three queued inside the engine (not stuck
                # unseen in the HTTP accept backlog), and /metrics still answers.
                await until_awaited(
                    one_busy_three_deferred, "1 request processing, 3 deferred", 30, poll=0.3
                )
            finally:
                for t in tasks:
                    t.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)


def _scrape(url: str) -> str:
    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        assert r.status == 200
        return str(r.read().decode())
