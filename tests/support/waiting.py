"""Wait for an event, not for a number of seconds.

A test that sleeps "long enough" for something to happen fails when a loaded machine
is slower than the guess, and wastes the time when it is faster. :func:`until` polls a
condition and returns as soon as it holds; its ``timeout`` is only the point at which
the test gives up (generous: it is never reached when the behaviour is right)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

__all__ = ["until", "until_blocking"]


async def until(cond: Callable[[], object], what: str, timeout: float = 20.0) -> None:
    """Return once ``cond()`` is true; fail with ``what`` if it is still false after
    ``timeout`` seconds (a bound for giving up, never the expected wait)."""
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"still waiting after {timeout} s for: {what}"
        await asyncio.sleep(0.01)


def until_blocking(cond: Callable[[], object], what: str, timeout: float = 20.0) -> None:
    """:func:`until` for a test without an event loop (a process to be gone)."""
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"still waiting after {timeout} s for: {what}"
        time.sleep(0.01)
