"""Helpers for the batch integration tests: input files, a counting server, the CLI."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
from aiohttp import web

from infersight.batch.runner import CUSTOM_ID_HEADER
from infersight_testkit.fake.openai import FakeConfig, FakeOpenAI


def write_rows(
    path: Path, n: int, *, max_tokens: int = 8, extra: dict[str, Any] | None = None
) -> list[str]:
    """An OpenAI Batch input of ``n`` chat rows; returns the custom_ids."""
    ids = [f"row-{i:04d}" for i in range(n)]
    with path.open("w") as f:
        for i, cid in enumerate(ids):
            body = {
                "model": "fake",
                "max_tokens": max_tokens,
                "messages": [{"role": "user", "content": f"question number {i}"}],
                **(extra or {}),
            }
            f.write(
                json.dumps(
                    {
                        "custom_id": cid,
                        "method": "POST",
                        "url": "/v1/chat/completions",
                        "body": body,
                    }
                )
                + "\n"
            )
    return ids


class CountingServer:
    """FakeOpenAI in this process, counting generation requests per custom_id."""

    def __init__(self, config: FakeConfig, *, names_requests: bool = True) -> None:
        self.fake = FakeOpenAI(config)
        self.counts: Counter[str] = Counter()
        self.base_url = ""
        #: False: answers carry no X-Request-Id (as llama.cpp's server sends none).
        self.names_requests = names_requests

    @staticmethod
    async def _unnamed(request: web.Request, response: web.StreamResponse) -> None:
        response.headers.popall("X-Request-Id", None)

    @web.middleware
    async def _count(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        cid = request.headers.get(CUSTOM_ID_HEADER)
        if cid is not None and request.method == "POST":
            self.counts[unquote(cid)] += 1
        return await handler(request)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[CountingServer]:
        app = self.fake.app()
        app.middlewares.append(self._count)
        if not self.names_requests:
            app.on_response_prepare.append(self._unnamed)
        self.fake._closing = asyncio.Event()
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        self.base_url = f"http://127.0.0.1:{port}"
        try:
            yield self
        finally:
            self.fake._closing.set()
            await runner.cleanup()


@pytest.fixture
def counting_server() -> Callable[[FakeConfig], CountingServer]:
    return CountingServer


async def start_cli(*args: str, env: dict[str, str] | None = None) -> asyncio.subprocess.Process:
    """Start ``infersight ARGS`` as a subprocess (not waited for)."""
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        "from infersight.cli import main; main()",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, **(env or {})},
    )


async def run_cli(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> tuple[int, str, str]:
    proc = await start_cli(*args, env=env)
    out, err = await asyncio.wait_for(proc.communicate(), timeout)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


@pytest.fixture
def cli() -> Callable[..., Awaitable[tuple[int, str, str]]]:
    return run_cli


@pytest.fixture
def write_input() -> Callable[..., list[str]]:
    return write_rows


@pytest.fixture
def spawn_cli() -> Callable[..., Awaitable[asyncio.subprocess.Process]]:
    return start_cli
