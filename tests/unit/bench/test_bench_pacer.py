"""The open-loop dispatcher's timer: never early, and no polling while it waits."""

from __future__ import annotations

import asyncio
import gc
import sys
import time
from typing import Any

import pytest

from infersight.bench.executor import run_level
from infersight.bench.level.work import LevelWork
from infersight.bench.pacer import Pacer
from infersight.bench.runtime import run_coroutine
from infersight.core.records import RequestRecord


def test_waits_end_at_or_after_the_instant_and_cost_no_cpu() -> None:
    async def go() -> tuple[list[float], float, bool]:
        pacer = Pacer()
        precise = pacer.precise
        late: list[float] = []
        t0 = time.monotonic() + 0.01
        cpu0 = time.process_time()
        try:
            for i in range(200):  # 1 ms apart: the loop timers' own resolution
                at = t0 + i * 0.001
                await pacer.until(at)
                late.append(time.monotonic() - at)
        finally:
            pacer.close()
        return late, time.process_time() - cpu0, precise

    late, cpu, precise = run_coroutine(go())
    assert min(late) >= 0  # never before the intended instant
    # 0.2 s of waiting: polling would burn most of it; sleeping costs a few ms.
    assert cpu < 0.1
    if sys.platform.startswith("linux"):
        assert precise  # a timerfd, not the loop's millisecond timers


class _Instant:
    """A sender that answers at once, recording when each request was sent."""

    async def request(
        self,
        path: str,
        body: dict[str, Any],
        *,
        scheduled: float | None = None,
        deadline: float | None = None,
        request_id: str | None = None,
        record: RequestRecord | None = None,
    ) -> Any:
        assert record is not None
        record.sent = time.monotonic()
        record.end, record.ok = record.sent, True
        return None


def test_open_loop_at_1000_per_second_sends_on_time_without_polling() -> None:
    work = LevelWork(
        name="r",
        path="/v1/chat/completions",
        bodies=[{}],
        slots=[(i, i * 0.001) for i in range(400)],
    )

    async def go() -> Any:
        return await run_level(_Instant(), work, t0=time.monotonic() + 0.02, stop=lambda: False)

    out = run_coroutine(go())
    assert len(out.records) == 400
    assert all(r.sent is not None and r.sent >= r.scheduled for r in out.records)
    # Waiting costs little: the loop sleeps until each instant (generous bound for a
    # loaded test machine; an idle one measures ~15%).
    assert out.cpu_percent < 60


def test_a_level_freezes_what_lives_so_collections_skip_it() -> None:
    seen: list[int] = []

    class Watching(_Instant):
        async def request(self, *args: Any, **kwargs: Any) -> Any:
            seen.append(gc.get_freeze_count())
            return await super().request(*args, **kwargs)

    work = LevelWork(name="r", path="/p", bodies=[{}], slots=[(i, i * 0.6) for i in range(3)])
    out = run_coroutine(run_level(Watching(), work, t0=time.monotonic(), stop=lambda: False))
    assert len(out.records) == 3
    assert all(n > 0 for n in seen)  # everything alive at the start is out of reach...
    assert seen[-1] > seen[0]  # ...and what lived past a second joined it
    assert gc.get_freeze_count() == 0  # handed back when the level ended


@pytest.mark.parametrize("policy", ["uvloop", "asyncio"])
def test_pacer_works_on_both_loops(policy: str) -> None:
    async def go() -> float:
        pacer = Pacer()
        at = time.monotonic() + 0.02
        try:
            await pacer.until(at)
        finally:
            pacer.close()
        return time.monotonic() - at

    late = run_coroutine(go()) if policy == "uvloop" else asyncio.run(go())
    assert late >= 0
