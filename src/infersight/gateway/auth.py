"""Gateway API keys and per-key rate limits.

Keys are stored only as sha256 hex digests. A presented key is hashed and compared
with every stored digest through ``hmac.compare_digest`` (no early exit), so timing
says nothing about which digest nearly matched. Keys never reach logs, metrics or
error messages: everything downstream sees only the key's configured *name*.

Rate limits are token buckets refilled continuously: ``requests_per_minute`` is
charged one per request at admission; ``tokens_per_minute`` is charged with the
request's real usage once it is known, and a key in debt is refused until it has
refilled. Refusals carry the seconds until the bucket allows the next request.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from infersight.gateway.config import KeyConfig
from infersight.gateway.errors import KeyRefused, KeyThrottled

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
    ) -> None:
        self._keys = [
            _Key(
                k,
                bytes.fromhex(k.sha256),
                TokenBucket(k.requests_per_minute, clock=clock) if k.requests_per_minute else None,
                TokenBucket(k.tokens_per_minute, clock=clock) if k.tokens_per_minute else None,
            )
            for k in keys
        ]
        self.enabled = bool(self._keys) or require

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

    def admit(self, name: str | None, estimated_tokens: int = 0) -> None:
        """Charge one request against ``name``'s limits; raise RateLimited when over."""
        k = self._find(name)
        if k is None:
            return
        if k.tokens is not None and k.tokens.level <= 0:
            wait = k.tokens.wait_for(1.0)
            raise KeyThrottled(
                f"key {name!r} is over its token rate limit "
                f"({k.cfg.tokens_per_minute:g} tokens/min)",
                status=429,
                retry_after=wait,
            )
        if k.requests is not None:
            wait = k.requests.take(1.0)
            if wait > 0:
                raise KeyThrottled(
                    f"key {name!r} is over its request rate limit "
                    f"({k.cfg.requests_per_minute:g} requests/min)",
                    status=429,
                    retry_after=wait,
                )

    def charge_tokens(self, name: str | None, tokens: int) -> None:
        """Charge the request's real token usage once known."""
        k = self._find(name)
        if k is not None and k.tokens is not None and tokens > 0:
            k.tokens.charge(tokens)

    def _find(self, name: str | None) -> _Key | None:
        if name is None:
            return None
        for k in self._keys:
            if k.cfg.name == name:
                return k
        return None
