"""The spare-grant policy on its own (no Redis): who keeps spares, when one is taken,
used, waited for and given back."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from infersight.gateway import hash_key
from infersight.gateway.config import KeyConfig
from infersight.gateway.shared.spares import MARGIN, TTL_S, Spares, far


def _key(rpm: float | None = 1000, **kw: float) -> KeyConfig:
    return KeyConfig(name="k", sha256=hash_key("k"), requests_per_minute=rpm, **kw)


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_far_means_above_the_margin_and_the_share() -> None:
    assert far(None, 1000) and far(5, None)  # no such limit: nothing to be near
    assert far(50, 1000) and not far(49.9, 1000)  # 5% of 1000
    assert far(MARGIN, 100) and not far(MARGIN - 0.1, 100)  # the floor of 16
    assert Spares.eligible(_key()) and not Spares.eligible(_key(rpm=None))
    assert not Spares.eligible(_key(max_cost_usd=5.0))  # budgets read the spend


async def test_spare_is_taken_after_an_answer_and_used_once_while_fresh() -> None:
    clock, takes, backs = Clock(), [], []

    async def take(key: KeyConfig) -> tuple[str, bool]:
        takes.append(key.name)
        return f"grant-{len(takes)}", True

    async def give_back(key: KeyConfig) -> None:
        backs.append(key.name)

    used, returned = [], []
    sp: Spares[str] = Spares(take, give_back, clock=clock, on_used=lambda: used.append(1),
                             on_returned=lambda: returned.append(1))
    key = _key()
    sp.refill(key)  # no admission noted yet: nothing is known to be far
    await asyncio.sleep(0)
    assert takes == [] and not sp.at_hand("k")
    sp.note(key, True)
    sp.refill(key)
    sp.refill(key)  # one on its way already: no second take
    await asyncio.sleep(0.01)
    assert takes == ["k"] and sp.at_hand("k")
    assert sp.use(key) == "grant-1" and sp.use(key) is None  # used once
    assert len(used) == 1
    sp.refill(key)
    await asyncio.sleep(0.01)
    clock.t += TTL_S + 0.5  # left unused: too old to admit with, given back by sweep
    assert sp.use(key) is None
    sp.sweep()
    await asyncio.sleep(0.01)
    assert backs == ["k"] and len(returned) == 1 and not sp.at_hand("k")
    assert len(used) == 1  # an old spare is not used
    sp.note(key, False)  # near the limit now: no more spares
    sp.refill(key)
    await asyncio.sleep(0.01)
    assert takes == ["k", "k"]
    await sp.close()


async def _ignore(key: KeyConfig) -> None:
    pass


def _fetching(take: Callable[[KeyConfig], Awaitable[tuple[str, bool]]]) -> Spares[str]:
    """Spares of a far key whose first spare is being fetched with ``take``."""
    sp: Spares[str] = Spares(take, _ignore)
    sp.note(_key(), True)
    sp.refill(_key())
    return sp


async def test_a_refused_request_waits_for_the_spare_on_its_way() -> None:
    gate = asyncio.Event()

    async def take(key: KeyConfig) -> tuple[str, bool]:
        await gate.wait()
        return "late-grant", True

    sp, key = _fetching(take), _key()
    waiter = asyncio.create_task(sp.use_or_wait(key))
    await asyncio.sleep(0.01)
    assert not waiter.done()
    gate.set()
    assert await asyncio.wait_for(waiter, 1.0) == "late-grant"
    await sp.close()


async def test_a_fetch_cancelled_before_it_ran_releases_its_waiters() -> None:
    async def take(key: KeyConfig) -> tuple[str, bool]:
        raise AssertionError("never runs")

    sp = _fetching(take)
    for task in list(sp._tasks):
        task.cancel()
    assert await asyncio.wait_for(sp.use_or_wait(_key()), 1.0) is None
