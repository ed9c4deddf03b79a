"""One replica's shared state: the Redis link, key limits, breakers and the loop that
keeps them in step (breaker polls while Redis is up, reconnects while it is down)."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry

from infersight.gateway.breaker import CircuitBreaker
from infersight.gateway.shared.breakers import SharedBreakers
from infersight.gateway.shared.config import SharedConfig
from infersight.gateway.shared.limits import SharedLimits
from infersight.gateway.shared.link import RedisLink
from infersight.gateway.shared.metrics import SharedMetrics

if TYPE_CHECKING:
    from redis.asyncio import Redis

__all__ = ["SharedState"]

log = logging.getLogger("infersight.gateway")

#: The most closing waits for the loop and for charges in flight.
_CLOSE_WAIT_S = 2.0


class SharedState:
    """Everything a gateway replica shares with the others through Redis."""

    def __init__(
        self,
        cfg: SharedConfig,
        registry: CollectorRegistry,
        breakers: Mapping[str, CircuitBreaker],
        *,
        client: Redis | None = None,
    ) -> None:
        self.cfg = cfg
        self.metrics = SharedMetrics(registry)
        self.link = RedisLink(cfg, self.metrics, client=client)
        #: Names this replica in Redis (breaker owners): host, pid and a random part.
        self.replica = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.limits = SharedLimits(self.link, cfg)
        self.breakers = SharedBreakers(self.link, cfg, self.replica)
        for name, br in breakers.items():
            self.breakers.attach(name, br)
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Reach Redis (serving locally if it does not answer) and start the loop."""
        if await self.link.connect():
            await self.breakers.poll()
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            # Bounded: on Python 3.11 a cancel landing inside redis-py's nested timeouts
            # can be swallowed, and shutting down must not wait on it.
            await asyncio.wait({self._task}, timeout=_CLOSE_WAIT_S)
            self._task = None
        await self.limits.close()
        await self.breakers.close()
        await self.link.close()

    async def _run(self) -> None:
        poll = self.cfg.poll_ms / 1000.0
        while True:
            await asyncio.sleep(poll)
            try:
                await self._tick()
            except asyncio.CancelledError:
                raise
            except Exception:  # the loop must outlive any surprise; requests never see it
                log.exception("shared state: sync loop error")

    async def _tick(self) -> None:
        if self.link.up:
            await self.breakers.poll()
        elif self.link.retry_due() and await self.link.connect():
            await self.limits.flush()
            await self.breakers.resync()
            await self.breakers.poll()

    def health(self) -> dict[str, Any]:
        """The ``shared`` part of ``/health`` (public: no address, no error text)."""
        link = self.link
        return {
            "backend": "redis",
            "state": "up" if link.up else "down",
            "mode": "shared" if link.up else self.cfg.on_redis_error,
            "since": link.since,
            "for_s": round(time.time() - link.since, 3),
            "pending_spend_usd": round(sum(self.limits.pending.values()), 9),
        }

    def stats(self) -> dict[str, Any]:
        """The ``shared`` part of ``/stats``: the health plus where and why."""
        return {
            **self.health(),
            "url": self.link.url,
            "error": self.link.error,
            "replica": self.replica,
        }

    def warnings(self) -> list[str]:
        """A ``/health`` warning while Redis is unreachable (details in /stats and the log)."""
        if self.link.up:
            return []
        what = (
            "each replica enforces its own limits"
            if self.cfg.on_redis_error == "local"
            else "requests of keys with limits are refused"
        )
        return [f"shared state: redis unreachable for {time.time() - self.link.since:.0f}s; {what}"]
