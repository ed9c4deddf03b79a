"""One client request as the gateway tracks it, from arrival to the access log."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from infersight.client.client import new_request_id
from infersight.client.retry import RetryPolicy

__all__ = ["Call", "own_headers", "request_id"]


def request_id() -> str:
    """A fresh ``req-`` id for a request that came without a usable X-Request-Id (the
    client's id source: a per-process random prefix and a counter, far cheaper than
    uuid4's system call per request)."""
    return "req-" + new_request_id()


def own_headers() -> dict[str, str]:
    """The headers of the gateway's own answers (refusals, /health...): a fresh request
    id and ``X-Queue-Delay: 0.000`` (these never queue)."""
    return {"X-Request-Id": request_id(), "X-Queue-Delay": "0.000"}


@dataclass(slots=True)
class Call:
    """One client request and what became of it (for metrics and the access log)."""

    request_id: str
    endpoint: str
    path: str
    body: dict[str, Any]
    model: str
    stream: bool
    key: str | None
    arrival: float
    deadline: float
    priority: int = 0
    est_tokens: int = 0
    wants_usage: bool = False
    upstream: str = "-"
    served_model: str | None = None
    queue_delay: float = 0.0
    attempts: int = 0
    failovers: int = 0
    status: int = 0
    error: str | None = None
    ttft: float | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = None
    #: Set once a byte of the answer reached the client: no failover after that.
    committed: bool = False
    #: Another upstream may take the request over if this attempt fails (failover).
    next_candidate: bool = False
    #: This attempt's retry policy (None: the upstream's own); a single try while
    #: another upstream of the model could take the request over.
    retry: RetryPolicy | None = None
    #: The upstreams the request went through, in order, once it failed over.
    via: list[str] | None = None
    #: When the upstream's first content arrived (streams): the limiter's latency signal.
    first_content_at: float | None = None
    #: The stream broke after content was sent (the client got an SSE error event).
    truncated: bool = False
    #: Token counts estimated (no usage from the upstream: a cut or abandoned stream).
    usage_estimated: bool = False
    extra: dict[str, Any] = field(default_factory=dict)
