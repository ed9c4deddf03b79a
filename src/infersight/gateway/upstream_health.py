"""An upstream's recent error share, and the share of new requests that follows from it.

Each upstream counts the outcomes of its attempts in one-second buckets over a sliding
window of :data:`WINDOW_S` seconds. An *error* is what says the upstream is unwell or
busy: a 429, a 503, any other 5xx, a connect error, a reset, a timeout, a malformed
or broken answer. An *answer* is a success. A client's bad request, a cancelled
request and the gateway's own refusals say nothing and are not counted.

The routing weight is ``1 - error_share / FULL_SHARE``, kept within
``[MIN_WEIGHT, 1]``: an upstream failing none of its requests weighs 1, one failing a
quarter of them or more weighs the floor. The floor is above 0 so that a failing
upstream keeps a trickle of requests, whose outcomes show when it has recovered (its
old errors leave the window, and its weight climbs back within ``WINDOW_S``). Below
:data:`MIN_SAMPLES` outcomes in the window there is too little to judge, and the weight
is 1. The router gives each replica a share of new requests in proportion to its weight
(docs/design.md section 4); the circuit breaker still opens on consecutive failures.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

__all__ = [
    "MIN_SAMPLES",
    "MIN_WEIGHT",
    "WINDOW_S",
    "HealthWindow",
    "weighted_order",
]

T = TypeVar("T")

#: Seconds of outcomes the error share is measured over.
WINDOW_S = 10
#: The error share at which an upstream's weight reaches the floor.
FULL_SHARE = 0.25
#: The weight of an upstream that fails often: a trickle that shows its recovery.
MIN_WEIGHT = 0.05
#: Outcomes needed in the window before the error share moves the weight.
MIN_SAMPLES = 10


class HealthWindow:
    """Outcomes of one upstream's attempts over the last ``window`` seconds."""

    def __init__(
        self, window: int = WINDOW_S, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._n = window
        self._clock = clock
        self._ok = [0] * window
        self._err = [0] * window
        self._ok_sum = 0
        self._err_sum = 0
        #: The second the newest bucket holds; older buckets are cleared as time passes.
        self._now = int(clock())

    def _advance(self) -> int:
        sec = int(self._clock())
        if sec != self._now:
            # Clear the buckets of the seconds that passed (all of them after a long gap).
            for s in range(self._now + 1, min(sec, self._now + self._n) + 1):
                i = s % self._n
                self._ok_sum -= self._ok[i]
                self._err_sum -= self._err[i]
                self._ok[i] = self._err[i] = 0
            self._now = sec
        return sec % self._n

    def record(self, ok: bool) -> None:
        """Count one attempt's outcome: ``ok`` for an answer, False for an error."""
        i = self._advance()
        if ok:
            self._ok[i] += 1
            self._ok_sum += 1
        else:
            self._err[i] += 1
            self._err_sum += 1

    def counts(self) -> tuple[int, int]:
        """(answers, errors) in the window."""
        self._advance()
        return self._ok_sum, self._err_sum

    def error_share(self) -> float:
        """Errors / outcomes in the window (0.0 with no outcome)."""
        ok, err = self.counts()
        return err / (ok + err) if ok + err else 0.0

    def weight(self) -> float:
        """The routing weight (see the module docstring)."""
        ok, err = self.counts()
        if not err or ok + err < MIN_SAMPLES:
            return 1.0
        w = 1.0 - (err / (ok + err)) / FULL_SHARE
        return MIN_WEIGHT if w < MIN_WEIGHT else w


def weighted_order(
    items: Sequence[T], weights: Sequence[float], rand: Callable[[], float] = random.random
) -> list[T]:
    """``items`` in a random order where each comes first with probability in
    proportion to its weight (Efraimidis-Spirakis: sort by ``u ** (1 / w)``)."""
    keys = [rand() ** (1.0 / w) for w in weights]
    order = sorted(range(len(items)), key=keys.__getitem__, reverse=True)
    return [items[i] for i in order]
