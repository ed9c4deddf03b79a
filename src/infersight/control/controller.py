"""Concurrency controllers: how many requests may be in flight to one server right now.

Controllers are pure Python and know nothing about HTTP: a caller (the batch runner,
the gateway's admission control) feeds them sends, completions and errors with
timestamps and reads ``limit`` (the most requests in flight) and ``pause_until`` (no
new sends before this monotonic time, from a server's Retry-After). That keeps them
testable without a server: the unit tests drive them with a simulated server.
:class:`FixedConcurrency` is batch's ``--concurrency N``;
:class:`~infersight.control.adaptive.AdaptiveConcurrency` finds the level.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from infersight.core.errors import ConfigError

__all__ = ["ConcurrencyController", "Decision", "FixedConcurrency"]

_MAX_LOG = 2000


@dataclass(frozen=True, slots=True)
class Decision:
    """One change of the concurrency limit: when (s since start), from, to, and why."""

    t: float
    old: int
    new: int
    reason: str

    def to_dict(self) -> dict[str, object]:
        return {"t": round(self.t, 3), "old": self.old, "new": self.new, "reason": self.reason}


@dataclass
class ConcurrencyController:
    """What the runner needs from a controller, and the bookkeeping every controller
    shares: the in-flight count, Retry-After pauses, the limit history. As it stands the
    limit never changes (:class:`FixedConcurrency`); a law overrides the hooks below."""

    limit: int
    t0: float
    max_pause: float = 120.0
    pause_until: float = 0.0
    inflight: int = 0
    decisions: list[Decision] = field(default_factory=list)
    history: list[tuple[float, int]] = field(default_factory=list)

    def _log(self, now: float, new: int, reason: str) -> None:
        if len(self.decisions) >= _MAX_LOG:
            # Keep the first half (the ramp) and the most recent; drop the middle.
            del self.decisions[_MAX_LOG // 2]
        self.decisions.append(Decision(now - self.t0, self.limit, new, reason))
        self.limit = new
        self.history.append((now, new))

    def _pause(self, now: float, retry_after: float | None) -> None:
        if retry_after is not None and retry_after > 0:
            self.pause_until = max(self.pause_until, now + min(retry_after, self.max_pause))

    def on_send(self, now: float) -> None:
        self._tick(now)
        self.inflight += 1

    def on_success(
        self,
        now: float,
        *,
        started: float,
        latency: float,
        ttft: float | None = None,
        tpot: float | None = None,
    ) -> None:
        self._tick(now)
        self.inflight = max(0, self.inflight - 1)
        self._answered(now, started, latency, ttft, tpot)

    def on_error(
        self,
        now: float,
        *,
        started: float,
        kind: str,
        congestion: bool,
        retry_after: float | None = None,
    ) -> None:
        self._tick(now)
        self.inflight = max(0, self.inflight - 1)
        if congestion:
            self._pause(now, retry_after)
            self._congested(now, started, kind, retry_after)

    # What a law adds: each is called after the bookkeeping above.
    def _tick(self, now: float) -> None:
        """Before the in-flight count changes (a send, an answer, an error)."""

    def _answered(
        self, now: float, started: float, latency: float, ttft: float | None, tpot: float | None
    ) -> None:
        """An answer came back (the in-flight count already lowered)."""

    def _congested(self, now: float, started: float, kind: str, retry_after: float | None) -> None:
        """A congestion error came back (the Retry-After pause already taken)."""

    def settled(self, now: float) -> float:
        """Time-weighted median of the limit over the last half of the run."""
        if not self.history:
            return float(self.limit)
        start = self.t0 + (now - self.t0) / 2
        spans: dict[int, float] = {}
        for i, (t, lim) in enumerate(self.history):
            end = self.history[i + 1][0] if i + 1 < len(self.history) else now
            a, b = max(t, start), end
            if b > a:
                spans[lim] = spans.get(lim, 0.0) + (b - a)
        if not spans:
            return float(self.limit)
        total = sum(spans.values())
        acc = 0.0
        for lim in sorted(spans):
            acc += spans[lim]
            if acc >= total / 2:
                return float(lim)
        return float(self.limit)  # pragma: no cover - unreachable


class FixedConcurrency(ConcurrencyController):
    """``--concurrency N``: the limit never changes; Retry-After is still honoured."""

    def __init__(self, limit: int, *, now: float, max_pause: float = 120.0) -> None:
        if limit < 1:
            raise ConfigError("concurrency must be >= 1")
        super().__init__(limit=limit, t0=now, max_pause=max_pause)
        self.history.append((now, limit))
        self.decisions.append(Decision(0.0, limit, limit, "fixed by --concurrency"))
