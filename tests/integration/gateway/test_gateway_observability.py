"""/metrics passes promtool's lint and is scraped by a real Prometheus; /stats."""

from __future__ import annotations

import asyncio
from pathlib import Path
from urllib.parse import quote

import aiohttp
import pytest
from gateway_stack import CHAT, StackFactory

from infersight.testing.fake_openai import FakeConfig


@pytest.mark.needs("promtool")
async def test_metrics_pass_promtool(make_stack: StackFactory) -> None:
    async with make_stack([FakeConfig(tokens=2)]) as s:
        await s.post("/v1/chat/completions", CHAT)
        await s.post("/v1/chat/completions", {**CHAT, "stream": True})
        async with s.session.get(s.url + "/metrics") as r:
            text = await r.read()
    assert b"infersight_gateway_ttft_seconds_bucket" in text
    proc = await asyncio.create_subprocess_exec(
        "promtool", "check", "metrics", stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(proc.communicate(text), 30)
    assert proc.returncode == 0, out


@pytest.mark.needs("prometheus")
async def test_real_prometheus_scrapes_the_gateway(make_stack: StackFactory,
                                                   tmp_path: Path) -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        prom_port = sock.getsockname()[1]
    async with make_stack([FakeConfig(tokens=2)]) as s:
        for _ in range(3):
            assert (await s.post("/v1/chat/completions", CHAT))[0] == 200
        target = s.url.removeprefix("http://")
        cfg = tmp_path / "prometheus.yml"
        cfg.write_text(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: gw\n"
            f"    static_configs:\n      - targets: ['{target}']\n"
        )
        proc = await asyncio.create_subprocess_exec(
            "prometheus", f"--config.file={cfg}", f"--storage.tsdb.path={tmp_path / 'data'}",
            f"--web.listen-address=127.0.0.1:{prom_port}",
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
        )
        try:
            value = None
            promql = 'sum(infersight_gateway_requests_total{status="200"})'
            q = f"http://127.0.0.1:{prom_port}/api/v1/query?query={quote(promql)}"
            async with aiohttp.ClientSession() as http:
                for _ in range(60):
                    await asyncio.sleep(0.5)
                    try:
                        async with http.get(q) as r:
                            doc = await r.json()
                    except aiohttp.ClientError:
                        continue
                    result = doc.get("data", {}).get("result", [])
                    if result:
                        value = float(result[0]["value"][1])
                        break
            assert value == 3.0
        finally:
            proc.terminate()
            await proc.wait()


async def test_stats_endpoint(make_stack: StackFactory) -> None:
    async with make_stack([FakeConfig(tokens=2)], upstreams=[{"concurrency": 3}]) as s:
        await s.post("/v1/chat/completions", CHAT)
        async with s.session.get(s.url + "/stats") as r:
            doc = await r.json()
        up = doc["upstreams"][0]
        assert up["name"] == "a" and up["limit"] == 3 and up["circuit"] == "closed"
        assert up["in_flight"] == 0 and doc["cost"]["by_model"]["fake"]["completion_tokens"] == 2
