"""/metrics passes promtool's lint and is scraped by a real Prometheus; /stats."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp
import pytest
from gateway_stack import CHAT, StackFactory
from prometheus_client.parser import text_string_to_metric_families

from infersight_testkit.fake.openai import FakeConfig
from support.waiting import until_awaited


@pytest.mark.needs("promtool")
async def test_metrics_pass_promtool(make_stack: StackFactory) -> None:
    async with make_stack([FakeConfig(tokens=2)]) as s:
        await s.post("/v1/chat/completions", CHAT)
        await s.post("/v1/chat/completions", {**CHAT, "stream": True})
        async with s.session.get(s.url + "/metrics") as r:
            text = await r.read()
    assert b"infersight_gateway_ttft_seconds_bucket" in text
    proc = await asyncio.create_subprocess_exec(
        "promtool",
        "check",
        "metrics",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(proc.communicate(text), 30)
    assert proc.returncode == 0, out


@pytest.mark.needs("prometheus")
async def test_real_prometheus_scrapes_the_gateway(
    make_stack: StackFactory, tmp_path: Path
) -> None:
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
            "prometheus",
            f"--config.file={cfg}",
            f"--storage.tsdb.path={tmp_path / 'data'}",
            f"--web.listen-address=127.0.0.1:{prom_port}",
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        try:
            promql = 'sum(infersight_gateway_requests_total{status="200"})'
            q = f"http://127.0.0.1:{prom_port}/api/v1/query?query={quote(promql)}"
            async with aiohttp.ClientSession() as http:

                async def scraped() -> list[Any]:
                    try:
                        async with http.get(q) as r:
                            doc = await r.json()
                    except aiohttp.ClientError:
                        return []  # Prometheus is still starting
                    return list(doc.get("data", {}).get("result", []))

                # Prometheus scrapes every second: asking more often than twice a
                # second finds nothing new
                result = await until_awaited(scraped, "Prometheus to scrape", 30, poll=0.5)
            assert float(result[0]["value"][1]) == 3.0
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


async def test_a_healthy_gateway_shows_zero_errors_and_cost_and_names_unpriced_models(
    make_stack: StackFactory, tmp_path: Path
) -> None:
    # Dashboard panels sum these by label: before any error or cost, each series must
    # exist at 0 (a panel then shows 0, not "No data").
    prices = tmp_path / "prices.toml"
    prices.write_text('[models."fake"]\ninput = 1.0\noutput = 2.0\n')
    async with make_stack(
        [FakeConfig(tokens=2), FakeConfig(tokens=2)],
        upstreams=[{}, {"models": ["free"]}],
        prices_file=str(prices),
    ) as s:
        async with s.session.get(s.url + "/metrics") as r:
            text = await r.text()
        families = {f.name: f for f in text_string_to_metric_families(text)}
        errors = {
            x.labels["error"]: x.value
            for x in families["infersight_gateway_errors"].samples
            if x.name.endswith("_total")
        }
        assert {"ResetError", "DeadlineExceeded", "Overloaded", "InvalidRequest"} <= set(errors)
        assert set(errors.values()) == {0.0}
        rejections = {x.labels["reason"] for x in families["infersight_gateway_rejections"].samples}
        assert {"queue_full", "auth", "malformed", "head_timeout"} <= rejections
        cost = {
            x.labels["model"]: x.value
            for x in families["infersight_gateway_cost_usd"].samples
            if x.name.endswith("_total")
        }
        assert cost == {"fake": 0.0}  # priced: from 0; "free" has no price, so no cost series
        priced = {
            x.labels["model"]: x.value for x in families["infersight_gateway_model_priced"].samples
        }
        assert priced == {"fake": 1.0, "free": 0.0}
        status, _, _ = await s.post("/v1/chat/completions", CHAT)
        assert status == 200
        assert await s.metric("infersight_gateway_cost_usd_total", model="fake") > 0
        assert await s.metric("infersight_gateway_errors_total") == 0
