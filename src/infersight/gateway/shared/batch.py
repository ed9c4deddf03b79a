"""One Lua script called by many requests at once, pipelined.

With nothing in flight, a call goes out at once (a lone request pays no batching
delay). While one is in flight, calls made in the same turn of the event loop go out
together as one pipeline: one write and one read for all of them, about a quarter of
the client CPU per call at 32 concurrent requests. Each script still runs atomically
on its own in Redis (the pipeline is not a transaction), so batching changes no
decision.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from infersight.gateway.shared.link import RedisLink

if TYPE_CHECKING:
    from redis.asyncio import Redis

__all__ = ["ScriptBatcher"]

_Call = tuple[list[str], list[str], "asyncio.Future[Any]"]


class ScriptBatcher:
    """Runs ``script`` for many callers; a reply of None means "Redis unavailable"."""

    def __init__(self, link: RedisLink, script: str, op: str) -> None:
        self.link = link
        self.op = op
        self._script = link.client.register_script(script)
        self._queue: list[_Call] = []
        self._inflight = 0
        self._tasks: set[asyncio.Task[None]] = set()

    async def __call__(self, keys: list[str], args: list[str]) -> Any:
        if self._inflight == 0:
            self._inflight += 1
            try:
                return await self.link.call(
                    self.op, lambda r: self._script(keys=keys, args=args)
                )
            finally:
                self._inflight -= 1
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Any] = loop.create_future()
        self._queue.append((keys, args, fut))
        if len(self._queue) == 1:
            loop.call_soon(self._flush)  # what joins in this loop turn goes out together
        return await fut

    def _flush(self) -> None:
        batch, self._queue = self._queue, []
        task = asyncio.get_running_loop().create_task(self._send(batch))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send(self, batch: list[_Call]) -> None:
        self._inflight += 1
        replies: list[Any] | None = None
        try:
            replies = await self.link.call(self.op, lambda r: self._pipeline(r, batch))
        finally:
            self._inflight -= 1
            for i, (_, _, fut) in enumerate(batch):
                if not fut.done():
                    fut.set_result(None if replies is None else replies[i])

    async def _pipeline(self, r: Redis, batch: list[_Call]) -> list[Any]:
        from redis.exceptions import NoScriptError

        for attempt in range(2):
            async with r.pipeline(transaction=False) as p:
                for keys, args, _ in batch:
                    p.evalsha(self._script.sha, len(keys), *keys, *args)
                replies: list[Any] = await p.execute(raise_on_error=False)
            if attempt == 0 and any(isinstance(x, NoScriptError) for x in replies):
                await r.script_load(self._script.script)  # a restarted Redis forgot it
                continue
            break
        errors = [x for x in replies if isinstance(x, Exception)]
        if errors:
            raise errors[0]  # the link turns it into "go local" for the whole batch
        return replies

    async def close(self) -> None:
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=2.0)
