"""Circuit-breaker opens shared between replicas.

When a replica's breaker opens on its own evidence, it writes
``PREFIX:{breakers}:UPSTREAM = <replica id>`` with the cooldown as the key's expiry.
Every replica reads all breaker keys in one script every ``poll_ms`` (200 ms by
default) and opens its own breaker for the key's remaining time, so an upstream found
dead by one replica is left alone by all of them within a poll. Only opens are shared:
each replica probes on its own once the cooldown has passed, and a failed probe opens
(and shares) the breaker again. Closing is never imposed on another replica.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any

from infersight.gateway.breaker import BreakerState, CircuitBreaker
from infersight.gateway.shared.config import SharedConfig
from infersight.gateway.shared.link import RedisLink

__all__ = ["SharedBreakers"]

log = logging.getLogger("infersight.gateway")

#: KEYS: breaker keys. Returns {pttl, owner, pttl, owner, ...} (pttl < 0: not open).
_POLL = """
local out = {}
for i, k in ipairs(KEYS) do
  out[2 * i - 1] = redis.call('PTTL', k)
  out[2 * i] = redis.call('GET', k) or ''
end
return out
"""

#: The same open seen again (the poll rereads a key until it expires) is not re-applied.
_SAME_OPEN_S = 0.5


class SharedBreakers:
    """Publishes this replica's breaker opens and applies the other replicas' ones."""

    def __init__(
        self,
        link: RedisLink,
        cfg: SharedConfig,
        replica: str,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.link = link
        self.replica = replica
        self._prefix = cfg.prefix
        self._clock = clock
        self._poll = link.client.register_script(_POLL)
        self._breakers: dict[str, CircuitBreaker] = {}
        #: Upstream -> monotonic time until which a remote open was applied.
        self._applied: dict[str, float] = {}
        #: Upstream -> monotonic time until which this replica's own open lasts.
        self._own: dict[str, float] = {}
        self._tasks: set[asyncio.Task[Any]] = set()

    def key(self, upstream: str) -> str:
        return f"{self._prefix}:{{breakers}}:{upstream}"

    def attach(self, upstream: str, breaker: CircuitBreaker) -> None:
        """Share ``breaker``'s opens under the upstream's name."""
        self._breakers[upstream] = breaker
        breaker.on_open = lambda cooldown: self.opened(upstream, cooldown)

    def opened(self, upstream: str, cooldown: float) -> None:
        """This replica's breaker opened: tell the others (in the background)."""
        self._own[upstream] = self._clock() + cooldown
        if self.link.up:
            self._spawn(self._publish(upstream, cooldown))

    async def _publish(self, upstream: str, seconds: float) -> None:
        ms = max(1, int(seconds * 1000))
        key = self.key(upstream)
        await self.link.call("breaker", lambda r: r.set(key, self.replica, px=ms))

    async def resync(self) -> None:
        """After an outage: share the opens this replica made while Redis was away."""
        now = self._clock()
        for upstream, until in list(self._own.items()):
            br = self._breakers.get(upstream)
            if until > now and br is not None and br.state is BreakerState.OPEN:
                await self._publish(upstream, until - now)

    async def poll(self) -> None:
        """Read every breaker key once; open local breakers that others opened."""
        names = list(self._breakers)
        if not names:
            return
        keys = [self.key(n) for n in names]
        reply = await self.link.call("poll", lambda r: self._poll(keys=keys, args=[]))
        if reply is None:
            return
        now = self._clock()
        for i, name in enumerate(names):
            pttl, owner = int(reply[2 * i]), str(reply[2 * i + 1])
            if pttl <= 0 or owner == self.replica:
                continue
            until = now + pttl / 1000.0
            if until <= self._applied.get(name, 0.0) + _SAME_OPEN_S:
                continue
            self._applied[name] = until
            br = self._breakers[name]
            if br.open_for(pttl / 1000.0):
                self.link.metrics.remote_opens.labels(name).inc()
                log.warning(
                    "upstream %s: circuit opened by replica %s for %.1fs",
                    name,
                    owner,
                    pttl / 1000.0,
                )

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        if self._tasks:  # each is bounded by the link's timeout; this bounds the rest
            await asyncio.wait(list(self._tasks), timeout=2.0)
