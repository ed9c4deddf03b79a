"""The fake's on-demand KV (vLLM): the prompt at admission, each token as it is made,
and the latest admitted request preempted when no room is left; it goes back to the
head of the queue and comes back with what it must recompute."""

from __future__ import annotations

import asyncio

from infersight.telemetry.promtext import parse_metrics
from infersight_testkit import FakeConfig
from infersight_testkit.fake.metrics import EngineMetrics
from infersight_testkit.fake.slots import SlotPool


async def test_growth_past_the_capacity_preempts_the_latest_admitted() -> None:
    pool = SlotPool(8, kv_capacity=100, kv_mode="on_demand")
    a = await pool.acquire(30)
    b = await pool.acquire(30)
    assert pool.reserved == 60 and pool.running == 2
    a = await pool.grow(a, 30)  # 90 held: fits
    assert pool.reserved == 90 and pool.preemptions == 0
    # a needs 20 more: b, admitted last, is evicted and its 30 tokens freed
    a = await pool.grow(a, 20)
    assert pool.preemptions == 1 and pool.running == 1 and pool.reserved == 80
    assert b.preempted and b.recompute == 30
    # b comes back at the head of the queue once a leaves, to recompute its 30 tokens
    back = asyncio.create_task(pool.grow(b, 1))
    late = asyncio.create_task(pool.acquire(10))
    await asyncio.sleep(0)
    assert pool.waiting == 2
    pool.release(a)
    b2 = await back
    assert b2 is not b and b2.recompute == 30 and b2.need == 31
    assert (await late).order > b2.order  # the preempted one went first
    pool.release(b2)
    assert pool.running == 1


async def test_reserve_mode_never_preempts() -> None:
    pool = SlotPool(8, kv_capacity=100)
    a = await pool.acquire(60)
    assert await pool.grow(a, 1000) is a
    assert pool.preemptions == 0 and pool.reserved == 60


def test_vllm_metrics_export_preemptions_and_the_cache_config() -> None:
    cfg = FakeConfig(metrics_dialect="vllm", slots=4, kv_capacity=400, kv_mode="on_demand")
    pool = SlotPool(4, 400, "on_demand")
    pool.preemptions = 3
    series, _ = parse_metrics(EngineMetrics(cfg, pool).render().decode())
    by_name = {s.name: s for s in series}
    assert by_name["vllm:num_preemptions_total"].value == 3
    info = by_name["vllm:cache_config_info"]
    assert info.labels["kv_cache_size_tokens"] == "400" and info.labels["num_gpu_blocks"] == "400"
