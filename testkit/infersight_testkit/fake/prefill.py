"""Batched prefill for the fake server (``FakeConfig.batch_prefill``), as vLLM's and
llama.cpp's schedulers do it: the prompts admitted while a prefill waits or has just
begun share one prefill step, and each gets its first token when that step ends.

A group opens at a request's admission, or when the group before it ends if that is
later. A request admitted within ``window`` (one decode step) of the open group's start
joins it and lengthens it by its own prompt; a later one opens the next group, after
this one. The group's step takes the fixed first-token time once and the per-token
prefill of every member's prompt.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["PrefillBatches", "PrefillGroup"]


@dataclass(slots=True)
class PrefillGroup:
    """One prefill step: when it starts and ends (its members' first tokens)."""

    start: float
    end: float


class PrefillBatches:
    """The fake's prefill groups on ``clock`` (the monotonic clock; a test's own):
    ``admit`` places a prompt, ``join`` waits for its first token."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._last: PrefillGroup | None = None

    def admit(self, *, first: float, per_prompt: float, window: float) -> PrefillGroup:
        """Place a prompt whose own prefill takes ``per_prompt`` seconds (``first`` the
        step's fixed part) in the open group or a new one; the group it joined."""
        now = self._clock()
        g = self._last
        if g is not None and g.start >= now - window:
            g.end += per_prompt
            return g
        start = max(now, g.end) if g is not None else now
        self._last = PrefillGroup(start, start + first + per_prompt)
        return self._last

    async def join(self, *, first: float, per_prompt: float, window: float) -> float:
        """``admit``, then wait until the group's step ends; the seconds waited (this
        request's time to its first token)."""
        now = self._clock()
        g = self.admit(first=first, per_prompt=per_prompt, window=window)
        # a prompt that joins later moves the end: wait until no one has moved it
        while (left := g.end - self._clock()) > 0:
            await asyncio.sleep(left)
        return self._clock() - now
