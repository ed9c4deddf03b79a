"""Gateway API keys and per-key rate limits.

Keys are stored only as sha256 hex digests. A presented key is hashed and compared
with every stored digest through ``hmac.compare_digest`` (no early exit), so timing
says nothing about which digest nearly matched. Keys never reach logs, metrics or
error messages: everything downstream sees only the key's configured *name*.

Rate limits are token buckets refilled continuously: ``requests_per_minute`` is
charged one per request at admission; ``tokens_per_minute`` is charged with the
request's real usage once it is known, and a key in debt is refused until it has
refilled. Refusals carry the seconds until the bucket allows the next request.
``max_cost_usd`` is a budget: once the key's priced usage reaches it, its requests
get 429 ``insufficient_quota``.

With a :class:`~infersight.gateway.shared.SharedLimits` the limits and spend are the
fleet's, kept in Redis; the local buckets are still charged, so that a replica that
loses Redis goes on from its own recent use (``local_share`` of each limit).
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from infersight.gateway.config import KeyConfig
from infersight.gateway.errors import KeyRefused, KeyThrottled

if TYPE_CHECKING:
    from infersight.gateway.shared import SharedLimits

__all__ = ["KeyStore", "TokenBucket", "bearer_token"]


class TokenBucket:
    """A continuously refilled bucket; ``capacity`` tokens per ``period`` seconds."""

    def __init__(
        self, capacity: float, period: float = 60.0, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.capacity = capacity
        self.rate = capacity / period
        self._clock = clock
        self._level = capacity
        self._t = clock()

    def _refill(self) -> None:
        now = self._clock()
        self._level = min(self.capacity, self._level + (now - self._t) * self.rate)
        self._t = now

    @property
    def level(self) -> float:
        self._refill()
        return self._level

    def wait_for(self, amount: float) -> float:
        """Seconds until ``amount`` could be taken (0 when it can be now)."""
        self._refill()
        need = min(amount, self.capacity) - self._level
        return 0.0 if need <= 0 else need / self.rate

    def take(self, amount: float = 1.0) -> float:
        """Take ``amount`` if available and return 0; else take nothing, return the wait."""
        wait = self.wait_for(amount)
        if wait == 0.0:
            self._level -= amount
        return wait

    def charge(self, amount: float) -> None:
        """Take ``amount`` unconditionally (may go into debt)."""
        self._refill()
        self._level -= amount


@dataclass
class _Key:
    cfg: KeyConfig
    digest: bytes
    requests: TokenBucket | None
    tokens: TokenBucket | None
    #: Dollars spent: the fleet's total as Redis last said, plus what was charged here since.
    spent: float = 0.0

    @property
    def limited(self) -> bool:
        return (
            self.requests is not None
            or self.tokens is not None
            or (self.cfg.max_cost_usd is not None)
        )


def bearer_token(header: str | None) -> str | None:
    """The key from ``Authorization: Bearer <key>`` (or None)."""
    if not header:
        return None
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        return None
    return value.strip()


class KeyStore:
    """Authenticates presented keys and enforces their rate limits."""

    def __init__(
        self,
        keys: Sequence[KeyConfig],
        *,
        require: bool = False,
        clock: Callable[[], float] = time.monotonic,
        shared: SharedLimits | None = None,
        local_share: float = 1.0,
    ) -> None:
        def bucket(limit: float | None) -> TokenBucket | None:
            return TokenBucket(limit * local_share, clock=clock) if limit else None

        self._keys = [
            _Key(
                k,
                bytes.fromhex(k.sha256),
                bucket(k.requests_per_minute),
                bucket(k.tokens_per_minute),
            )
            for k in keys
        ]
        self.enabled = bool(self._keys) or require
        self._shared = shared

    def authenticate(self, authorization: str | None) -> str | None:
        """Return the key's name (None when auth is off); raise AuthError when refused."""
        if not self.enabled:
            return None
        presented = bearer_token(authorization)
        if presented is None:
            raise KeyRefused(
                "missing gateway API key: send 'Authorization: Bearer <key>'", status=401
            )
        digest = hashlib.sha256(presented.encode("utf-8", "surrogateescape")).digest()
        found: _Key | None = None
        for k in self._keys:  # no early exit: constant time over the key list
            if hmac.compare_digest(digest, k.digest):
                found = k
        if found is None:
            raise KeyRefused("invalid gateway API key", status=401)
        return found.cfg.name

    async def admit(self, name: str | None) -> None:
        """Charge one request against ``name``'s limits; raise KeyThrottled when over."""
        k = self._find(name)
        if k is None or not k.limited:
            return
        if self._shared is not None:
            admission = await self._shared.admit(k.cfg)
            if admission is not None:
                if admission.spent is not None:
                    k.spent = admission.spent
                if admission.refused is not None:
                    raise _refusal(k, admission.refused, admission.wait)
                if k.requests is not None:
                    k.requests.charge(1.0)  # keep the local view warm for an outage
                return
            if self._shared.reject_when_down:
                raise KeyThrottled(
                    f"key {k.cfg.name!r} is limited across gateway replicas and their shared "
                    "state (redis) is unreachable; retry shortly",
                    status=429,
                    retry_after=self._shared.retry_s,
                    code="shared_limits_unavailable",
                )
        self._admit_local(k)

    def _admit_local(self, k: _Key) -> None:
        budget = k.cfg.max_cost_usd
        if budget is not None and k.spent >= budget:
            raise _refusal(k, "budget", 0.0)
        if k.tokens is not None and k.tokens.level <= 0:
            raise _refusal(k, "tokens", k.tokens.wait_for(1.0))
        if k.requests is not None:
            wait = k.requests.take(1.0)
            if wait > 0:
                raise _refusal(k, "requests", wait)

    def charge_tokens(self, name: str | None, tokens: int, cost_usd: float | None = None) -> None:
        """Charge the request's real token usage and dollars once known."""
        k = self._find(name)
        if k is None:
            return
        if k.tokens is not None and tokens > 0:
            k.tokens.charge(tokens)
        dollars = cost_usd or 0.0
        k.spent += dollars
        if self._shared is not None:
            self._shared.charge(k.cfg, tokens, dollars, lambda total: setattr(k, "spent", total))

    async def refresh_spend(self) -> None:
        """Read the fleet's spend totals from Redis (for /stats and /metrics)."""
        if self._shared is None:
            return
        totals = await self._shared.totals([k.cfg.name for k in self._keys])
        if totals is None:
            return  # Redis unreachable: keep the last totals plus local charges
        for k in self._keys:
            k.spent = totals[k.cfg.name]

    def spend(self) -> dict[str, tuple[float, float | None]]:
        """Key name -> (dollars spent, budget or None)."""
        return {k.cfg.name: (k.spent, k.cfg.max_cost_usd) for k in self._keys}

    def _find(self, name: str | None) -> _Key | None:
        if name is None:
            return None
        for k in self._keys:
            if k.cfg.name == name:
                return k
        return None


def _refusal(k: _Key, limit: str, wait: float) -> KeyThrottled:
    """The 429 for a key over its request or token rate, or out of budget."""
    name, cfg = k.cfg.name, k.cfg
    if limit == "budget":
        return KeyThrottled(
            f"key {name!r} has spent its budget (${k.spent:.4f} of ${cfg.max_cost_usd:g})",
            status=429,
            retry_after=3600.0,
            code="insufficient_quota",
        )
    if limit == "tokens":
        what = f"token rate limit ({cfg.tokens_per_minute:g} tokens/min)"
    else:
        what = f"request rate limit ({cfg.requests_per_minute:g} requests/min)"
    return KeyThrottled(f"key {name!r} is over its {what}", status=429, retry_after=wait)
