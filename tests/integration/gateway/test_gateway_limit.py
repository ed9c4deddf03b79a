"""``PUT /upstreams/{name}/limit`` changes an upstream's concurrency limit while the
gateway runs (key-protected like the rest), and ``tune`` searches that limit with no
restart (docs/design.md section 8)."""

from __future__ import annotations

import asyncio
import io
from typing import Any

import orjson
import pytest
from gateway_stack import CHAT, StackFactory
from rich.console import Console

from infersight.bench import BenchConfig
from infersight.entrypoints.tune import run_tune
from infersight.gateway import hash_key
from infersight.tune import TuneConfig
from infersight_testkit.fake.openai import FakeConfig
from support.waiting import until_awaited

KEY = "sk-gw-limit-0123456789"
AUTH = {"Authorization": f"Bearer {KEY}"}


async def _put(
    s: Any, path: str, body: bytes, headers: dict[str, str] | None = None
) -> tuple[int, Any]:
    async with s.session.put(s.url + path, data=body, headers=headers) as r:
        return r.status, orjson.loads(await r.read())


async def _state(s: Any, headers: dict[str, str] | None = None) -> dict[str, Any]:
    async with s.session.get(s.url + "/stats", headers=headers) as r:
        up: dict[str, Any] = (await r.json())["upstreams"][0]
        return up


async def test_the_limit_endpoint_is_checked_and_key_protected(make_stack: StackFactory) -> None:
    keys = [{"name": "ops", "sha256": hash_key(KEY)}]
    async with make_stack([FakeConfig()], keys=keys) as s:
        path = "/upstreams/a/limit"
        status, err = await _put(s, path, b'{"concurrency": 3}')
        assert status == 401 and err["error"]["type"] == "authentication_error"
        status, err = await _put(s, "/upstreams/zz/limit", b'{"concurrency": 3}', AUTH)
        assert status == 404 and "no upstream named 'zz'" in err["error"]["message"]
        for bad in (
            b"{}",
            b'{"concurrency": 0}',
            b'{"concurrency": "3"}',
            b"nope",
            b'{"concurrency": true}',
        ):
            status, err = await _put(s, path, bad, AUTH)
            assert status == 400 and err["error"]["param"] == "concurrency", bad
        status, state = await _put(s, path, b'{"concurrency": 3}', AUTH)
        assert status == 200 and state["limit"] == 3 and state["name"] == "a"
        assert (await _state(s, AUTH))["limit"] == 3


async def test_a_raised_limit_admits_the_waiting_requests_at_once(make_stack: StackFactory) -> None:
    async with make_stack([FakeConfig(ttft=10.0)], upstreams=[{"concurrency": 1}]) as s:
        # No keys configured: the admin endpoints are open (the gateway binds loopback).
        calls = [asyncio.create_task(s.post("/v1/chat/completions", CHAT)) for _ in range(3)]

        async def two_queued() -> dict[str, Any]:
            st = await _state(s)
            return st if st["queued"] == 2 else {}

        st = await until_awaited(two_queued, "two requests to queue")
        assert (st["in_flight"], st["queued"]) == (1, 2)
        status, state = await _put(s, "/upstreams/a/limit", b'{"concurrency": 3}')
        assert status == 200 and (state["in_flight"], state["queued"], state["limit"]) == (3, 0, 3)
        for c in calls:
            c.cancel()
        await asyncio.gather(*calls, return_exceptions=True)


@pytest.mark.heavy  # tune judges noise: beside another heavy test its A/A floor is not the server's
@pytest.mark.timeout(180)
async def test_tune_searches_a_gateway_limit_without_a_restart(
    make_stack: StackFactory, tmp_path: Any
) -> None:
    # Past 2 generations at once the upstream's steps slow down: more than 2 buys nothing,
    # and TPOT grows with the limit (10, 20, 40 ms at 2, 4, 8). The SLO makes the choice
    # one noise cannot flip: 8 misses it by its structure, 2 and 4 meet it. (Without it,
    # 2, 4 and 8 tie on throughput within a few percent, and 8 won a run by noise.)
    fake = FakeConfig(ttft=0.02, itl=0.01, tokens=8, compute_knee=2)
    async with make_stack([fake], upstreams=[{"concurrency": 8}]) as s:
        cfg = TuneConfig.build(
            url=s.url,
            upstream="a",
            search="grid",
            values=[1, 2, 4],
            out=str(tmp_path / "t"),
            progress=False,
        )
        bench = BenchConfig.build(
            max_tokens=8,
            input_tokens="fixed:8",
            requests=24,
            slo="tpot_p50<30ms",
            no_scrape=True,
            progress=False,
        )
        out = io.StringIO()
        result = await asyncio.to_thread(run_tune, cfg, bench, console=Console(file=out, width=160))
        assert result.target["kind"] == "gateway" and result.baseline == {"slots": 8}
        assert {t.setting["slots"] for t in result.trials} == {1, 2, 4, 8}
        assert all(t.status == "ok" for t in result.trials)
        if result.stopped == "done":  # (not when another process disturbed the A/A pair)
            assert result.chosen is not None and result.chosen["slots"] in (2, 4), [
                (t.setting, t.objective, t.status) for t in result.trials
            ]
        assert (await _state(s))["limit"] == 8  # put back as it was
        assert "back at 8" in " ".join(result.notes)
