"""Spare grants: shared request limits without a Redis round trip on a request's path.

A key far from its limits keeps one request already taken from its shared bucket, a
*spare*. The key's next request on this replica is admitted with it at once, and the
next spare is taken in the background once that request is answered (then the
script's CPU is spent between requests rather than on one's path). So a request waits
on Redis only when no spare is at hand (the key's first request, a burst, a client
that sends the next request before the spare is back) or when the key is near a
limit.

Why it stays exact where exactness matters:

- A spare is a request taken from the shared bucket by the same atomic script as any
  other, before its request arrives: the fleet never admits more than its buckets
  gave out.
- Near a limit (the request bucket below :data:`MARGIN` requests, or below
  :data:`MARGIN_SHARE` of the limit, whichever is more; the token bucket likewise) no
  new spare is taken, so every request asks Redis.
- A request Redis refuses first takes the spare of its key if one is at hand or on its
  way: spares taken while the bucket drained are spent, not lost.
- A spare unused for :data:`TTL_S` goes back to its bucket.

Keys with a spend budget never keep spares: their admission also reads the spend,
which a spare taken earlier would see stale.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    from infersight.gateway.config import KeyConfig

__all__ = ["MARGIN", "MARGIN_SHARE", "TTL_S", "Spares"]

#: No spare is taken while a bucket holds fewer than this many requests (or tokens)...
MARGIN = 16.0
#: ...or less than this share of its limit, whichever is more.
MARGIN_SHARE = 0.05
#: Seconds a spare waits for a request before it goes back to its bucket.
TTL_S = 1.0

V = TypeVar("V")


def far(level: float | None, limit: float | None) -> bool:
    """Whether a bucket at ``level`` (None: no such limit) is far from ``limit``."""
    if level is None or limit is None:
        return True
    return level >= max(MARGIN, MARGIN_SHARE * limit)


def _release(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


@dataclass(slots=True)
class _Slot(Generic[V]):
    """One key's spare (a verdict of an admitted take), and the take on its way."""

    key: KeyConfig
    spare: V | None = None
    taken_at: float = 0.0
    #: Whether the bucket was far from its limit when the spare was taken.
    far: bool = False
    fetch: asyncio.Future[None] | None = field(default=None)


class Spares(Generic[V]):
    """Per-key spares of one replica.

    ``take(key)`` runs the admission script for ``key``: an admitting verdict and
    whether the key's buckets are still far from their limits, or None (refused, or
    Redis unreachable); ``give_back(key)`` returns one request to the bucket;
    ``on_used`` and ``on_returned`` count spares (the limits pass their metrics). The
    limits call :meth:`note` after each admission Redis decided, :meth:`refill` after
    each answer, and the replica's loop calls :meth:`sweep`.
    """

    def __init__(
        self,
        take: Callable[[KeyConfig], Awaitable[tuple[V, bool] | None]],
        give_back: Callable[[KeyConfig], Coroutine[Any, Any, object]],
        *,
        on_used: Callable[[], object] = lambda: None,
        on_returned: Callable[[], object] = lambda: None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._take = take
        self._give_back = give_back
        self._on_used = on_used
        self._on_returned = on_returned
        self._clock = clock
        self._slots: dict[str, _Slot[V]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()

    @staticmethod
    def eligible(key: KeyConfig) -> bool:
        """Only keys with a request limit and no budget keep spares."""
        return key.requests_per_minute is not None and key.max_cost_usd is None

    def at_hand(self, name: str) -> bool:
        """Whether key ``name`` has a spare now."""
        slot = self._slots.get(name)
        return slot is not None and slot.spare is not None

    def use(self, key: KeyConfig) -> V | None:
        """The key's spare, if one is at hand (then the next one is fetched)."""
        slot = self._slots.get(key.name)
        if slot is None or slot.spare is None or self._clock() - slot.taken_at > TTL_S:
            return None  # an old spare waits for sweep() to give it back
        spare, slot.spare = slot.spare, None
        self._on_used()
        return spare

    async def use_or_wait(self, key: KeyConfig) -> V | None:
        """For a request Redis refused: the key's spare, waiting for one on its way."""
        slot = self._slots.get(key.name)
        if slot is None:
            return None
        if slot.spare is None and slot.fetch is not None:
            await asyncio.shield(slot.fetch)
        return self.use(key)

    def note(self, key: KeyConfig, is_far: bool) -> None:
        """Redis admitted a request of ``key``; ``is_far``: a spare may be taken."""
        slot = self._slots.get(key.name)
        if slot is None:
            slot = self._slots[key.name] = _Slot(key)
        slot.key, slot.far = key, is_far

    def refill(self, key: KeyConfig) -> None:
        """Take the key's next spare in the background, if its buckets were far from
        their limits at the last admission and none is at hand or on its way."""
        slot = self._slots.get(key.name)
        if slot is None or not slot.far or slot.spare is not None or slot.fetch is not None:
            return
        fut = slot.fetch = asyncio.get_running_loop().create_future()
        task = self._spawn(self._fetch(key, slot))
        # A task cancelled before it ran never reaches _fetch's finally: whoever waits
        # for this spare (use_or_wait) must still be released.
        task.add_done_callback(lambda _: _release(fut))

    async def _fetch(self, key: KeyConfig, slot: _Slot[V]) -> None:
        fut = slot.fetch
        try:
            got = await self._take(key)
            if got is None:
                slot.far = False  # refused, or Redis away: the next request asks
            else:
                slot.spare, slot.far, slot.taken_at = got[0], got[1], self._clock()
        finally:
            slot.fetch = None
            if fut is not None:
                _release(fut)

    def sweep(self) -> None:
        """Give back spares unused for :data:`TTL_S` (called by the replica's loop)."""
        now = self._clock()
        for slot in self._slots.values():
            if slot.spare is not None and now - slot.taken_at > TTL_S:
                slot.spare = None
                self._on_returned()
                self._spawn(self._give_back(slot.key))

    def _spawn(self, coro: Coroutine[Any, Any, object]) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def close(self) -> None:
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=2.0)
