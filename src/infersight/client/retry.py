"""Retry policy: exponential backoff with full jitter, and a shared retry budget.

docs/design.md section 3: only ConnectError, ConnectTimeout, 408/429/502/503/504 and a
ResetError before any content are retried; never once content reached the caller.
A server's Retry-After is honoured when it fits inside the deadline; otherwise the
request fails fast with that error. A :class:`RetryBudget` shared by every request of
a Client caps retries to a fraction of recent requests so an outage does not turn
into a retry storm.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from infersight.core import errors as E
from infersight.core.errors import ConfigError
from infersight.core.records import RequestRecord

T = TypeVar("T")

__all__ = ["RetryBudget", "RetryPolicy", "run_with_retries"]


class RetryBudget:
    """At most ``ratio`` extra attempts per request over a sliding ``window``.

    ``min_retries`` retries are always allowed per window, so a client sending few
    requests can still retry them. ``deposit()`` is called once per request,
    ``withdraw()`` before each retry; it returns False when the budget is spent.
    """

    def __init__(self, ratio: float = 0.2, window: float = 10.0, min_retries: int = 10) -> None:
        if ratio < 0 or window <= 0 or min_retries < 0:
            raise ConfigError("RetryBudget needs ratio >= 0, window > 0, min_retries >= 0")
        self.ratio = ratio
        self.window = window
        self.min_retries = min_retries
        self._requests: deque[float] = deque()
        self._retries: deque[float] = deque()
        #: Retries refused because the budget was spent (since creation).
        self.refused = 0

    def _prune(self, now: float) -> None:
        cut = now - self.window
        for q in (self._requests, self._retries):
            while q and q[0] < cut:
                q.popleft()

    def deposit(self, now: float | None = None) -> None:
        """Count one new request (old ones are dropped as they leave the window)."""
        t = time.monotonic() if now is None else now
        q = self._requests
        q.append(t)
        if q[0] < t - self.window:  # bounded memory when no retry ever prunes
            self._prune(t)

    def withdraw(self, now: float | None = None) -> bool:
        """Take one retry from the budget; False when it is spent."""
        t = time.monotonic() if now is None else now
        self._prune(t)
        allowed = self.min_retries + self.ratio * len(self._requests)
        if len(self._retries) + 1 > allowed:
            self.refused += 1
            return False
        self._retries.append(t)
        return True

    def __repr__(self) -> str:
        return (
            f"RetryBudget(ratio={self.ratio}, window={self.window}, min_retries={self.min_retries})"
        )


@dataclass(slots=True)
class RetryPolicy:
    """How many attempts, how long to wait between them, and the shared budget.

    ``max_attempts`` counts the first attempt (1 = never retry). The wait before retry
    n (n >= 1) is uniform in ``[0, min(max_delay, base_delay * 2**(n-1))]`` (full
    jitter) unless the server gave Retry-After.
    """

    max_attempts: int = 3
    base_delay: float = 0.2
    max_delay: float = 10.0
    budget: RetryBudget | None = field(default_factory=RetryBudget)
    #: How a wait is spent: tests pass their own to read the waits without waiting.
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep

    def __post_init__(self) -> None:
        if self.max_attempts < 1 or self.base_delay < 0 or self.max_delay < 0:
            raise ConfigError(
                "retry policy needs max_attempts >= 1 and non-negative delays, got "
                f"max_attempts={self.max_attempts}, base_delay={self.base_delay}, "
                f"max_delay={self.max_delay}"
            )

    def backoff(self, retry_number: int) -> float:
        """Seconds to wait before retry ``retry_number`` (1-based), with full jitter."""
        cap = min(self.max_delay, self.base_delay * (2.0 ** max(0, retry_number - 1)))
        return random.uniform(0.0, cap)

    @classmethod
    def none(cls) -> RetryPolicy:
        """A policy that never retries."""
        return cls(max_attempts=1, budget=None)


async def run_with_retries(
    attempt: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    rec: RequestRecord,
    deadline: float,
    url: str,
) -> T:
    """Call ``attempt`` until it succeeds or the policy says stop; count attempts.

    A retryable error is retried after the server's Retry-After, or else a
    full-jitter backoff, if that wait fits before the deadline and the budget allows;
    otherwise the error itself is raised at once (fail fast).
    """
    budget = policy.budget
    n = 0
    while True:
        n += 1
        rec.attempts = n
        try:
            if time.monotonic() >= deadline:
                raise E.DeadlineExceeded(f"the request to {url} passed its deadline")
            return await attempt()
        except E.InfersightError as e:
            if not e.retryable or n >= policy.max_attempts:
                raise
            ra = e.retry_after if isinstance(e, E.StatusError) else None
            # +1 ms so that a timer firing a hair early never undercuts Retry-After.
            wait = ra + 0.001 if ra is not None else policy.backoff(n)
            if time.monotonic() + wait >= deadline:
                raise  # the wait does not fit before the deadline: fail fast with the error
            if budget is not None and not budget.withdraw():
                raise
            await policy.sleep(wait)
