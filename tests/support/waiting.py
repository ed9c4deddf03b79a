"""Wait for an event, not for a number of seconds.

A test that sleeps "long enough" for something to happen fails when a loaded machine
is slower than the guess, and wastes the time when it is faster. :func:`until` polls a
condition and returns as soon as it holds; its ``timeout`` is only the point at which
the test gives up (generous: it is never reached when the behaviour is right).

Each returns the condition's first true value, so a poll can also fetch what it
waited for (``url = until_blocking(lambda: log_url(path), "the server to listen")``).
A condition may raise to end the wait at once (a process that died while waited on).

This module is the one place in the tests that sleeps between looks;
``tests/unit/test_tests_wait_on_events.py`` holds the rest of the tests to that."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

__all__ = ["until", "until_awaited", "until_blocking"]

T = TypeVar("T")

#: Seconds between looks: short, so that a wait ends soon after its event.
POLL = 0.01


async def until(cond: Callable[[], T], what: str, timeout: float = 20.0, poll: float = POLL) -> T:
    """Return ``cond()``'s value once it is true; fail with ``what`` if it is still
    false after ``timeout`` seconds (a bound for giving up, never the expected wait)."""
    deadline = time.monotonic() + timeout
    while not (got := cond()):
        assert time.monotonic() < deadline, f"still waiting after {timeout} s for: {what}"
        await asyncio.sleep(poll)
    return got


async def until_awaited(
    cond: Callable[[], Awaitable[T]], what: str, timeout: float = 20.0, poll: float = POLL
) -> T:
    """:func:`until` for a condition that must be awaited (a query to a server);
    ``poll`` spaces the queries out so that the server is not flooded."""
    deadline = time.monotonic() + timeout
    while not (got := await cond()):
        assert time.monotonic() < deadline, f"still waiting after {timeout} s for: {what}"
        await asyncio.sleep(poll)
    return got


def until_blocking(
    cond: Callable[[], T], what: str, timeout: float = 20.0, poll: float = POLL
) -> T:
    """:func:`until` for a test without an event loop (a process to be gone)."""
    deadline = time.monotonic() + timeout
    while not (got := cond()):
        assert time.monotonic() < deadline, f"still waiting after {timeout} s for: {what}"
        time.sleep(poll)
    return got
