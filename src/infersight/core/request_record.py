"""One timing record per request (``docs/design.md`` sections 1 and 2), taken inside
the client; :mod:`infersight.core.records` stores them in the RunResult.

A module of its own so that :mod:`infersight.core.errors` (an error carries the record
of its request) and :mod:`infersight.core.records` (which raises those errors) do not
import each other.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

__all__ = ["RequestRecord"]


@dataclass(slots=True)
class RequestRecord:
    """Everything measured about one request, taken inside the client.

    ``chunk_times[i]`` is when the i-th SSE event carrying content (text or tool-call
    delta) arrived and ``chunk_tokens[i]`` how many tokens it carried (1 when the
    server does not say). A non-streamed response has one chunk at body arrival.
    """

    request_id: str
    #: Intended send time from the load strategy (monotonic seconds).
    scheduled: float
    sent: float | None = None
    headers: float | None = None
    chunk_times: list[float] = field(default_factory=list)
    chunk_tokens: list[int] = field(default_factory=list)
    end: float | None = None
    #: HTTP status of the final attempt (None if no response arrived).
    status: int | None = None
    #: True only for a complete answer: 2xx and ``[DONE]`` or a finish_reason seen.
    ok: bool = False
    #: Error kind (an ``infersight.core.errors`` class name) when not ok.
    error: str | None = None
    error_message: str | None = None
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    #: Prompt tokens the server took from its prefix cache
    #: (``usage.prompt_tokens_details.cached_tokens``); None when it does not say.
    cached_tokens: int | None = None
    #: True when completion_tokens was counted from chunks because usage was absent.
    tokens_estimated: bool = False
    #: True when the server's usage and the content-chunk count disagree.
    usage_mismatch: bool = False
    #: Seconds spent queued in a gateway, from the ``X-Queue-Delay`` header (ms).
    queue_delay: float | None = None
    attempts: int = 0
    #: Times the request was written again, without an attempt, because the pooled
    #: connection it was given had been closed by the server before any byte of it was
    #: written (docs/design.md section 3: resend is not retry).
    resends: int = 0
    #: Request id from the server's ``X-Request-Id`` header, when given.
    server_request_id: str | None = None
    cancelled: bool = False
    #: Free-form labels: load level, worker index, endpoint, model, upstream.
    labels: dict[str, str] = field(default_factory=dict)

    # -- derived metrics (docs/design.md section 2) -------------------------------------
    @property
    def schedule_lag(self) -> float | None:
        return None if self.sent is None else self.sent - self.scheduled

    @property
    def ttft(self) -> float | None:
        """Time to first token from the intended send time."""
        return self.chunk_times[0] - self.scheduled if self.chunk_times else None

    @property
    def ttft_from_sent(self) -> float | None:
        if not self.chunk_times or self.sent is None:
            return None
        return self.chunk_times[0] - self.sent

    @property
    def e2e(self) -> float | None:
        return None if self.end is None else self.end - self.scheduled

    @property
    def e2e_from_sent(self) -> float | None:
        return None if self.end is None or self.sent is None else self.end - self.sent

    @property
    def output_tokens(self) -> int:
        """Server usage when known, else the sum of chunk token counts."""
        if self.completion_tokens is not None:
            return self.completion_tokens
        return sum(self.chunk_tokens)

    @property
    def tpot(self) -> float | None:
        """(last chunk - first chunk) / (output_tokens - 1), for >= 2 output tokens."""
        n = self.output_tokens
        if n < 2 or len(self.chunk_times) < 2:
            return None
        return (self.chunk_times[-1] - self.chunk_times[0]) / (n - 1)

    @property
    def itl_mean(self) -> float | None:
        """Per-request mean inter-chunk gap (GuideLLM's ITL)."""
        if len(self.chunk_times) < 2:
            return None
        return (self.chunk_times[-1] - self.chunk_times[0]) / (len(self.chunk_times) - 1)

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in _RECORD_FIELDS}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RequestRecord:
        # Files written by newer versions may carry extra keys: ignore them.
        if d.keys() <= _RECORD_FIELD_SET:
            return cls(**d)
        return cls(**{k: v for k, v in d.items() if k in _RECORD_FIELD_SET})


_RECORD_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(RequestRecord))
_RECORD_FIELD_SET = frozenset(_RECORD_FIELDS)
