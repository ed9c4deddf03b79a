"""Plain data types of the client: time limits and a finished completion."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from infersight.core.errors import ConfigError
from infersight.core.records import RequestRecord

__all__ = ["Completion", "Timeouts"]


@dataclass(slots=True)
class Timeouts:
    """Time limits, in seconds (None = no limit).

    ``connect`` bounds opening one connection; ``first_token`` bounds the wait from
    sending an attempt to its first content (FirstTokenTimeout); ``idle`` bounds the gap
    between two content chunks (IdleTimeout); ``total`` is the one deadline across all
    attempts and retry waits (DeadlineExceeded), relative to the request's start.
    A non-streamed answer has no content chunks: its first byte is the response head
    (``first_token`` ends there) and ``idle`` bounds each gap while its body arrives.
    """

    connect: float | None = 10.0
    first_token: float | None = None
    idle: float | None = None
    total: float | None = 600.0

    def __post_init__(self) -> None:
        for name in ("connect", "first_token", "idle", "total"):
            v = getattr(self, name)
            if v is not None and not v > 0:
                raise ConfigError(f"timeout {name} must be > 0 seconds or None, got {v!r}")


@dataclass(slots=True)
class Completion:
    """A finished request: its record, the text, and what the server said.

    ``response`` is the body of a non-streamed answer, or for a stream a merged
    OpenAI-style final body (id, model, choices with the whole message, usage).
    """

    record: RequestRecord
    text: str
    finish_reason: str | None
    usage: dict[str, Any] | None
    response: dict[str, Any] | None
    status: int
    headers: Mapping[str, str]
