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
from dataclasses import dataclass

__all__ = ["PrefillBatches"]


@dataclass(slots=True)
class _Group:
    start: float
    end: float


class PrefillBatches:
    """The fake's prefill groups; ``join`` waits for the first token of one prompt."""

    def __init__(self) -> None:
        self._last: _Group | None = None

    async def join(self, *, first: float, per_prompt: float, window: float) -> float:
        """Join (or open) a group with a prompt whose own prefill takes ``per_prompt``
        seconds, ``first`` the step's fixed part; wait until the group's step ends.
        Returns the seconds waited (this request's time to its first token)."""
        now = time.monotonic()
        g = self._last
        if g is not None and g.start >= now - window:
            g.end += per_prompt
        else:
            start = max(now, g.end) if g is not None else now
            g = self._last = _Group(start, start + first + per_prompt)
        # a prompt that joins later moves the end: wait until no one has moved it
        while (left := g.end - time.monotonic()) > 0:
            await asyncio.sleep(left)
        return time.monotonic() - now
