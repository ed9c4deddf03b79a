"""The ``[shared]`` table of the gateway config: state shared between replicas.

    [shared]
    redis_url = "redis://10.0.0.9:6379/0"   # or INFERSIGHT_GATEWAY_REDIS_URL
    on_redis_error = "local"                # or "reject"

Without ``redis_url`` every replica keeps its own limits, spend and breakers (the
default: one process, no extra service).
"""

from __future__ import annotations

from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator

from infersight.core.endpoint import shown_url

__all__ = ["SharedConfig"]

_SCHEMES = ("redis", "rediss", "unix")


class SharedConfig(BaseModel):
    """Where replicas share per-key limits, spend and circuit-breaker opens."""

    model_config = ConfigDict(extra="forbid")

    #: ``redis://[:password@]host:port/db``, ``rediss://`` (TLS) or ``unix:///path``.
    redis_url: str | None = Field(default=None, repr=False)
    #: While Redis is unreachable: ``local`` enforces each replica's own limits;
    #: ``reject`` refuses (429) requests of keys that have limits or a budget.
    on_redis_error: Literal["local", "reject"] = "local"
    #: The most one Redis call may add to a request; past it the replica goes local.
    timeout_ms: float = Field(default=100.0, gt=0, le=10_000)
    #: How often breaker opens of other replicas are read (and Redis checked).
    poll_ms: float = Field(default=200.0, ge=10, le=5_000)
    #: While Redis is unreachable, how often to try it again.
    retry_s: float = Field(default=1.0, gt=0, le=300)
    #: Connections to Redis per replica (each call holds one for a round trip; more
    #: calls at once wait for one).
    max_connections: int = Field(default=64, ge=1, le=10_000)
    #: Fraction of each key's limits one replica enforces on its own while Redis is
    #: unreachable (1/replicas keeps the fleet's total near the limit).
    local_share: float = Field(default=1.0, gt=0, le=1)
    #: Prefix of every Redis key (several gateway fleets can share one Redis).
    prefix: str = Field(default="infersight:gateway", min_length=1, max_length=200)

    @field_validator("redis_url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        if v is None or not v.strip():
            return None
        v = v.strip()
        scheme = urlsplit(v).scheme
        if scheme not in _SCHEMES:
            raise ValueError(
                f"redis_url {shown_url(v)!r} must start with redis://, rediss:// or unix://"
            )
        return v
