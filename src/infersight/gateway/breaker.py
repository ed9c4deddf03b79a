"""Circuit breaker per upstream: closed, open, half-open with probe requests.

- **closed**: requests flow; ``failures`` consecutive failures open it.
- **open**: requests skip this upstream (fail over) until ``cooldown`` has passed.
- **half-open**: at most ``probes`` requests at a time are let through as probes. One
  success closes the breaker; one failure opens it again for another cooldown.

Only upstream faults count as failures (connect errors, resets, timeouts, 5xx,
malformed streams). A client's bad request says nothing about the upstream's health,
and a 429 asks for less load, which the concurrency limiter handles. Outcomes of
requests sent before the circuit opened are ignored while it is open.

Replicas sharing state (``infersight.gateway.shared``) hear of each other's opens:
``on_open`` is called when this breaker opens on its own evidence, and
:meth:`open_for` opens it on another replica's.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable

__all__ = ["BreakerState", "CircuitBreaker"]


class BreakerState(enum.IntEnum):
    """Numeric values are what the ``circuit_state`` gauge exports."""

    CLOSED = 0
    HALF_OPEN = 1
    OPEN = 2


class CircuitBreaker:
    """A consecutive-failure breaker with a cooldown and bounded half-open probes."""

    def __init__(
        self,
        failures: int = 5,
        cooldown: float = 10.0,
        probes: int = 1,
        *,
        clock: Callable[[], float] = time.monotonic,
        on_change: Callable[[BreakerState], None] | None = None,
    ) -> None:
        self.failures = failures
        self.cooldown = cooldown
        self.probes = probes
        self._clock = clock
        self._on_change = on_change
        self._state = BreakerState.CLOSED
        self._consecutive = 0
        self._opened_at = 0.0
        self._probes_out = 0
        #: Called with the cooldown when failures seen here open the breaker.
        self.on_open: Callable[[float], None] | None = None

    @property
    def state(self) -> BreakerState:
        if self._state is BreakerState.OPEN and self._clock() - self._opened_at >= self.cooldown:
            self._set(BreakerState.HALF_OPEN)
        return self._state

    def available(self) -> bool:
        """Whether a request could be sent now (without taking a probe slot)."""
        st = self.state
        return st is BreakerState.CLOSED or (
            st is BreakerState.HALF_OPEN and self._probes_out < self.probes
        )

    def allow(self) -> bool:
        """Take permission to send one request; in half-open this takes a probe slot."""
        st = self.state
        if st is BreakerState.CLOSED:
            return True
        if st is BreakerState.HALF_OPEN and self._probes_out < self.probes:
            self._probes_out += 1
            return True
        return False

    def record_success(self) -> None:
        self._consecutive = 0
        # While open, a success can only come from a request sent before the circuit
        # opened: stale evidence. Only a success in half-open (a probe) closes it.
        if self.state is BreakerState.HALF_OPEN:
            self._probes_out = 0
            self._set(BreakerState.CLOSED)

    def record_failure(self) -> None:
        if self.state is BreakerState.OPEN:
            return  # stale: a request from before the circuit opened
        self._consecutive += 1
        if self._state is BreakerState.HALF_OPEN or (
            self._state is BreakerState.CLOSED and self._consecutive >= self.failures
        ):
            self._opened_at = self._clock()
            self._probes_out = 0
            self._set(BreakerState.OPEN)
            if self.on_open is not None:
                self.on_open(self.cooldown)

    def open_for(self, seconds: float) -> bool:
        """Open for ``seconds`` on another replica's evidence; False if already open longer."""
        if seconds <= 0 or self.seconds_until_probe() >= seconds:
            return False
        # Probing starts when ``cooldown`` has passed since ``_opened_at``: in ``seconds``.
        self._opened_at = self._clock() + seconds - self.cooldown
        self._probes_out = 0
        self._set(BreakerState.OPEN)
        return True

    def record_neutral(self) -> None:
        """The request ended without saying anything about health (e.g. a 400)."""
        if self._state is BreakerState.HALF_OPEN and self._probes_out > 0:
            self._probes_out -= 1

    def seconds_until_probe(self) -> float:
        """Seconds until the open breaker lets a probe through (0 when not open)."""
        if self.state is not BreakerState.OPEN:
            return 0.0
        return max(0.0, self.cooldown - (self._clock() - self._opened_at))

    def _set(self, state: BreakerState) -> None:
        if state is not self._state:
            self._state = state
            if self._on_change is not None:
                self._on_change(state)
