"""The replica's connection to Redis, with an up/down state that bounds every call.

While Redis answers, each call runs under ``timeout_ms``. The first call that fails
or runs past it marks the link *down*: from then on calls return None at once (no
request waits on a dead Redis) and the replica enforces its own limits, until the
background loop reaches Redis again (every ``retry_s``) and marks it *up*. Each
transition is logged once and shown in ``/health`` and ``/metrics``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit

from infersight.core.endpoint import shown_url
from infersight.core.errors import ConfigError
from infersight.gateway.shared.config import SharedConfig
from infersight.gateway.shared.metrics import SharedMetrics

if TYPE_CHECKING:
    from redis.asyncio import Redis

__all__ = ["RedisLink", "redis_client"]

log = logging.getLogger("infersight.gateway")

T = TypeVar("T")

INSTALL_HINT = "pip install 'infersight[redis]'"


def redis_client(cfg: SharedConfig) -> Redis:
    """A redis-py asyncio client for ``cfg.redis_url`` (no retries: the link decides)."""
    assert cfg.redis_url is not None
    try:
        from redis.asyncio import BlockingConnectionPool, Redis
        from redis.asyncio.retry import Retry
        from redis.backoff import NoBackoff
    except ImportError:
        raise ConfigError(
            f"[shared] redis_url is set but the redis client is not installed: {INSTALL_HINT}"
        ) from None
    timeout = cfg.timeout_ms / 1000.0
    try:
        # Blocking: a burst of admissions waits for a free connection (each is held
        # for one round trip) instead of failing with "too many connections".
        pool = BlockingConnectionPool.from_url(
            cfg.redis_url,
            max_connections=cfg.max_connections,
            timeout=None,  # the wait is bounded by RedisLink.call's timeout
            decode_responses=True,
            # No socket timeout: every call is bounded by RedisLink.call's own timeout.
            socket_timeout=None,
            socket_connect_timeout=max(2 * timeout, 0.5),
            retry=Retry(NoBackoff(), 0),
            health_check_interval=0,
        )
    except ValueError as e:
        raise ConfigError(f"[shared] redis_url {shown_url(cfg.redis_url)}: {e}") from None
    return Redis.from_pool(pool)


class RedisLink:
    """A Redis client plus whether this replica currently trusts it."""

    def __init__(
        self,
        cfg: SharedConfig,
        metrics: SharedMetrics,
        *,
        client: Redis | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        assert cfg.redis_url is not None
        self.cfg = cfg
        self.url = shown_url(cfg.redis_url)
        self.client = client if client is not None else redis_client(cfg)
        self.metrics = metrics
        self.timeout = cfg.timeout_ms / 1000.0
        self._clock = clock
        self._secret = _password(cfg.redis_url)
        self.up = False
        #: Wall-clock time of the last up/down change (for /health).
        self.since = time.time()
        self.error: str | None = "not connected yet"
        self._ever_up = False
        self._start_warned = False
        self._retry_at = 0.0
        self._latency: dict[str, Any] = {}

    async def call(self, op: str, fn: Callable[[Redis], Awaitable[T]]) -> T | None:
        """``fn(client)`` under the timeout; None when the link is down or the call fails."""
        if not self.up:
            return None
        t0 = self._clock()
        try:
            async with asyncio.timeout(self.timeout):
                result = await fn(self.client)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # any failure of Redis must end as "go local", never a 5xx
            self.metrics.errors.labels(op).inc()
            self.mark_down(op, e)
            return None
        hist = self._latency.get(op)
        if hist is None:
            hist = self._latency[op] = self.metrics.latency.labels(op)
        hist.observe(self._clock() - t0)
        return result

    def mark_down(self, op: str, e: BaseException) -> None:
        """Stop trusting Redis until the background loop reaches it again."""
        self._retry_at = self._clock() + self.cfg.retry_s
        if not self.up:
            return
        self.up = False
        self.since = time.time()
        self.error = self._describe(e)
        self.metrics.up.set(0)
        log.warning(
            "shared state: redis at %s unreachable during %s (%s); %s until it is back",
            self.url,
            op,
            self.error,
            self._fallback_text(),
        )

    def _fallback_text(self) -> str:
        if self.cfg.on_redis_error == "local":
            return "enforcing each replica's own limits"
        return "refusing requests of keys with limits (on_redis_error = reject)"

    def retry_due(self) -> bool:
        return not self.up and self._clock() >= self._retry_at

    async def connect(self) -> bool:
        """PING; on success mark the link up (logged when it was down)."""
        t0 = self._clock()
        try:
            async with asyncio.timeout(max(self.timeout, 1.0)):
                # Pooled connections from before an outage are dead (a restarted Redis
                # closed them): drop them all, or each would fail once more later.
                await self.client.connection_pool.disconnect()
                await self.client.ping()
        except asyncio.CancelledError:
            raise
        except Exception as e:
            self._retry_at = self._clock() + self.cfg.retry_s
            self.error = self._describe(e)
            if not self._ever_up and not self._start_warned:
                self._start_warned = True
                log.warning(
                    "shared state: redis at %s unreachable at start (%s); %s until it answers",
                    self.url,
                    self.error,
                    self._fallback_text(),
                )
            return False
        self.metrics.latency.labels("ping").observe(self._clock() - t0)
        rejoined, self._ever_up = self._ever_up, True
        self.up = True
        self.since = time.time()
        self.error = None
        self.metrics.up.set(1)
        if rejoined:
            self.metrics.rejoins.inc()
            log.warning(
                "shared state: redis at %s reachable again; limits, spend and "
                "breakers shared across replicas",
                self.url,
            )
        return True

    async def close(self) -> None:
        try:
            await self.client.aclose()
        except Exception:  # closing a dead connection may fail; nothing to do about it
            log.debug("shared state: closing the redis client failed", exc_info=True)

    def _describe(self, e: BaseException) -> str:
        text = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
        if isinstance(e, TimeoutError):
            text = f"no answer within {self.cfg.timeout_ms:g} ms"
        if self._secret:
            text = text.replace(self._secret, "***")
        return text[:300]


def _password(url: str) -> str | None:
    return urlsplit(url).password or None
