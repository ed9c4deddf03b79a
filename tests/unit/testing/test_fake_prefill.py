"""The fake server's batched prefill (``FakeConfig.batch_prefill``): prompts admitted
together share one prefill step and wait for each other's prompts; one admitted after
the gathering window waits for that step and then for its own. Only lower bounds are
asserted: a busy machine makes every wait longer, never shorter."""

from __future__ import annotations

import asyncio

from infersight.testing.fake.prefill import PrefillBatches

# a window wide enough that the three started in one loop turn always meet in it
FIRST, OWN, WINDOW = 0.05, 0.02, 0.03


async def _joins() -> tuple[list[float], float]:
    batches = PrefillBatches()
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    together = [
        asyncio.ensure_future(batches.join(first=FIRST, per_prompt=OWN, window=WINDOW))
        for _ in range(3)
    ]
    await asyncio.sleep(FIRST)  # past the window: the next prompt opens a group of its own
    await batches.join(first=FIRST, per_prompt=OWN, window=WINDOW)
    late = loop.time() - t0  # the late one's first token, counted from the first's start
    return list(await asyncio.gather(*together)), late


def test_prompts_admitted_together_wait_for_each_other_and_a_late_one_for_them() -> None:
    waits, late = asyncio.run(_joins())
    group = FIRST + 3 * OWN
    assert all(w >= group for w in waits)  # alone, each would wait FIRST + OWN
    assert late >= group + FIRST + OWN  # after the first group's step, its own
