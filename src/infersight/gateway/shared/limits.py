"""Per-key request and token limits and spend, enforced across replicas in Redis.

The buckets are the ones :class:`~infersight.gateway.auth.TokenBucket` keeps locally
(refilled continuously, ``limit`` per minute), but they live in Redis and each
decision is one Lua script: it reads the bucket, refills it by Redis's own clock
(``TIME``: replicas' clocks never disagree), decides and writes back atomically, so
concurrent requests on different replicas can never both take the last token (the
scripts are in :mod:`~infersight.gateway.shared.scripts`, run through redis-py's
``Script``). A request of a limited key costs one round trip at admission; its real
token use and dollars are charged after the answer, off the request's path, summed per
key and written together in one pipeline.

Keys (``{...}`` is a hash tag: one key's data sits in one Redis Cluster slot)::

    PREFIX:{key:NAME}:rpm     hash l (level), t (time)    expires once full again
    PREFIX:{key:NAME}:tpm     hash l, t                   expires once full again
    PREFIX:{key:NAME}:spend   dollars spent (INCRBYFLOAT)  no expiry: the budget ledger
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, cast

from infersight.gateway.shared.config import SharedConfig
from infersight.gateway.shared.link import RedisLink
from infersight.gateway.shared.scripts import ADMIT, CHARGE

if TYPE_CHECKING:
    from redis.asyncio import Redis

    from infersight.gateway.config import KeyConfig

__all__ = ["Admission", "SharedLimits"]

log = logging.getLogger("infersight.gateway")

Refusal = Literal["requests", "tokens", "budget"]

#: Charges are summed per key and written this often (seconds): token limits learn of
#: usage this much later, at one script per key and flush instead of one per request.
CHARGE_EVERY_S = 0.05


@dataclass(slots=True)
class _Owed:
    """Usage of one key charged here and not yet written to Redis."""

    key: KeyConfig
    on_spent: Callable[[float], None]
    tokens: int = 0
    dollars: float = 0.0


@dataclass(frozen=True, slots=True)
class Admission:
    """What Redis decided for one request of a key."""

    #: None: admitted (one request taken); else the limit that refused it.
    refused: Refusal | None
    #: Seconds until the refusing bucket allows the next request.
    wait: float
    #: The key's total spend in dollars, across replicas (read only for a key with a
    #: budget; None otherwise).
    spent: float | None


def _arg(v: float | None) -> str:
    return "" if v is None else repr(float(v))


class SharedLimits:
    """Admission and charging of keys' limits in Redis; None answers mean "go local"."""

    def __init__(self, link: RedisLink, cfg: SharedConfig, *, period: float = 60.0) -> None:
        self.link = link
        self.period = period
        self.reject_when_down = cfg.on_redis_error == "reject"
        #: What a refused client is told to wait while Redis is unreachable.
        self.retry_s = cfg.retry_s
        self._prefix = cfg.prefix
        self._admit = link.client.register_script(ADMIT)
        self._charge = link.client.register_script(CHARGE)
        self._fallback = link.metrics.fallbacks.labels(cfg.on_redis_error)
        #: Dollars charged while Redis was unreachable, added once it is back.
        self.pending: dict[str, float] = {}
        self._owed: dict[str, _Owed] = {}
        self._flusher: asyncio.Task[None] | None = None
        self._calls: dict[str, tuple[KeyConfig, list[str], list[str]]] = {}

    def _keys(self, name: str) -> tuple[str, str, str]:
        base = f"{self._prefix}:{{key:{name}}}"
        return base + ":rpm", base + ":tpm", base + ":spend"

    def _admit_call(self, key: KeyConfig) -> tuple[list[str], list[str]]:
        """The script's KEYS and ARGV for ``key`` (built once per key: the hot path)."""
        call = self._calls.get(key.name)
        if call is None or call[0] is not key:
            args = [
                _arg(key.requests_per_minute),
                _arg(key.tokens_per_minute),
                _arg(key.max_cost_usd),
                _arg(self.period),
            ]
            call = self._calls[key.name] = (key, list(self._keys(key.name)), args)
        return call[1], call[2]

    async def admit(self, key: KeyConfig) -> Admission | None:
        """Take one request from ``key``'s shared buckets; None when Redis is unreachable."""
        keys, args = self._admit_call(key)
        reply = await self.link.call("admit", lambda r: self._admit(keys=keys, args=args, client=r))
        if reply is None:
            self._fallback.inc()
            return None
        decision, wait, spent = reply[:3]
        refused = None if decision == "ok" else cast(Refusal, decision)
        total = self._total(key.name, spent) if spent != "" else None
        return Admission(refused, float(wait), total)

    def charge(
        self, key: KeyConfig, tokens: int, dollars: float, on_spent: Callable[[float], None]
    ) -> None:
        """Charge real usage after the answer, off the request's path; ``on_spent(total)``.

        Charges are summed per key and written every ``CHARGE_EVERY_S`` (50 ms).
        """
        if not self.link.up:
            if dollars > 0:
                self.pending[key.name] = self.pending.get(key.name, 0.0) + dollars
            return
        if tokens <= 0 and dollars <= 0:
            return
        owed = self._owed.get(key.name)
        if owed is None:
            owed = self._owed[key.name] = _Owed(key, on_spent)
        owed.tokens += max(0, tokens)
        owed.dollars += max(0.0, dollars)
        if self._flusher is None:
            self._flusher = asyncio.get_running_loop().create_task(self._flush_owed())

    async def _flush_owed(self) -> None:
        await asyncio.sleep(CHARGE_EVERY_S)
        owed, self._owed, self._flusher = list(self._owed.values()), {}, None

        async def charge_all(r: Redis) -> list[str]:
            pipe = r.pipeline(transaction=False)
            for o in owed:
                _, tpm_key, spend_key = self._keys(o.key.name)
                args = [
                    _arg(o.key.tokens_per_minute),
                    str(max(0, o.tokens)),
                    f"{o.dollars:.12f}",
                    _arg(self.period),
                ]
                await self._charge(keys=[tpm_key, spend_key], args=args, client=pipe)
            replies: list[str] = await pipe.execute()
            return replies

        totals = await self.link.call("charge", charge_all)
        for i, o in enumerate(owed):
            if totals is None:
                if o.dollars > 0:
                    self.pending[o.key.name] = self.pending.get(o.key.name, 0.0) + o.dollars
            else:
                o.on_spent(self._total(o.key.name, totals[i]))

    async def totals(self, names: list[str]) -> dict[str, float] | None:
        """Each key's total spend across replicas (None when Redis is unreachable)."""
        if not names:
            return {}
        keys = [self._keys(n)[2] for n in names]
        values = await self.link.call("spend", lambda r: r.mget(keys))
        if values is None:
            return None
        return {n: self._total(n, v) for n, v in zip(names, values, strict=True)}

    def _total(self, name: str, shared: str | bytes | float | None) -> float:
        """Redis's total plus dollars charged during an outage and not yet added there."""
        return float(shared or 0.0) + self.pending.get(name, 0.0)

    async def flush(self) -> None:
        """Add the dollars charged during an outage to the shared totals."""
        for name, dollars in list(self.pending.items()):
            spend_key = self._keys(name)[2]

            async def add(r: Redis, k: str = spend_key, usd: float = dollars) -> float:
                return float(await r.incrbyfloat(k, usd))

            if await self.link.call("flush", add) is None:
                return
            self.pending[name] -= dollars
            if abs(self.pending[name]) < 1e-12:
                del self.pending[name]

    async def close(self) -> None:
        """Write what is owed (bounded by the link's timeout, and by 2 s)."""
        if self._flusher is not None:
            await asyncio.wait([self._flusher], timeout=2.0)
