"""Dynamic batcher: group concurrent items and decide when each group is flushed.

Callers :meth:`DynamicBatcher.submit` an item under a *key* (items with different
keys, e.g. different models or parameters, never share a batch) and a *length*
(e.g. characters of input). Items of similar length share a batch: lengths fall into
geometric classes of ratio ``length_ratio``, so a short input never waits behind a
very long one. A batch is flushed when it holds ``max_batch_size`` units, or when its
oldest item has waited ``max_wait`` seconds. The ``run`` callable gets the batch and
returns one result *or exception* per item, so each caller receives its own outcome.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from infersight.core.errors import ProtocolError

__all__ = ["DynamicBatcher"]

In = TypeVar("In")
Out = TypeVar("Out")


@dataclass
class _Batch(Generic[In, Out]):
    key: Hashable
    items: list[In] = field(default_factory=list)
    futures: list[asyncio.Future[Out]] = field(default_factory=list)
    units: int = 0
    timer: asyncio.TimerHandle | None = None


class DynamicBatcher(Generic[In, Out]):
    """Collects items per (key, length class) and flushes them by size or age."""

    def __init__(
        self,
        run: Callable[[Hashable, list[In]], Awaitable[list[Out | BaseException]]],
        *,
        max_batch_size: int = 32,
        max_wait: float = 0.005,
        length_ratio: float = 4.0,
    ) -> None:
        self._run = run
        self.max_batch_size = max_batch_size
        self.max_wait = max_wait
        self._log_ratio = math.log(length_ratio) if length_ratio > 1 else 0.0
        self._open: dict[tuple[Hashable, int], _Batch[In, Out]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        #: Number of batches flushed, and of items they carried (for stats and tests).
        self.flushed_batches = 0
        self.flushed_items = 0

    def length_class(self, length: int) -> int:
        if self._log_ratio == 0.0:
            return 0
        return int(math.log(max(1, length)) / self._log_ratio)

    async def submit(self, key: Hashable, item: In, *, units: int = 1, length: int = 1) -> Out:
        """Add ``item`` and wait for its own result (or its own exception)."""
        loop = asyncio.get_running_loop()
        bkey = (key, self.length_class(length))
        batch = self._open.get(bkey)
        if batch is not None and batch.units + units > self.max_batch_size:
            self._flush(bkey)
            batch = None
        if batch is None:
            batch = _Batch(key)
            self._open[bkey] = batch
            if self.max_wait > 0:
                batch.timer = loop.call_later(self.max_wait, self._flush, bkey, batch)
        fut: asyncio.Future[Out] = loop.create_future()
        batch.items.append(item)
        batch.futures.append(fut)
        batch.units += units
        if batch.units >= self.max_batch_size or self.max_wait <= 0:
            self._flush(bkey)
        return await fut

    def _flush(self, bkey: tuple[Hashable, int], expected: _Batch[In, Out] | None = None) -> None:
        batch = self._open.get(bkey)
        if batch is None or (expected is not None and batch is not expected):
            return  # the timer fired for a batch that was already flushed by size
        del self._open[bkey]
        if batch.timer is not None:
            batch.timer.cancel()
        self.flushed_batches += 1
        self.flushed_items += len(batch.items)
        task = asyncio.get_running_loop().create_task(self._execute(batch))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _execute(self, batch: _Batch[In, Out]) -> None:
        try:
            results = await self._run(batch.key, batch.items)
            if len(results) != len(batch.items):
                raise ProtocolError(
                    f"batch runner returned {len(results)} results for {len(batch.items)} items"
                )
        except BaseException as e:  # every caller gets the failure, none waits forever
            for f in batch.futures:
                if not f.done():
                    f.set_exception(e)
            if isinstance(e, asyncio.CancelledError):
                raise
            return
        for f, r in zip(batch.futures, results, strict=True):
            if f.done():
                continue  # the caller went away
            if isinstance(r, BaseException):
                f.set_exception(r)
            else:
                f.set_result(r)

    async def close(self) -> None:
        """Flush what is open and wait for running batches."""
        for bkey in list(self._open):
            self._flush(bkey)
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
