"""Which requests of a load level the aggregates describe (docs/design.md section 2).

Membership is decided by each request's *intended send time* (``scheduled``), never by
when it finished: a request belongs to the window when it was scheduled inside it, and
everything about it counts however late it finishes or fails. Choosing by finish time
keeps the survivors and drops the requests that queued longest (under overload it
halves TTFT p99).

A window is *steady* when it holds at least :data:`MIN_REQUESTS` requests sent over at
least :data:`MIN_SECONDS`; otherwise the whole level is used and the window says
"no steady state". Throughput is counted over the *throughput span*
``[start, end + drain]``, where the drain is the time the window's own requests took to
finish after the window closed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from infersight.core.errors import ConfigError
from infersight.core.records import RequestRecord

__all__ = ["MIN_REQUESTS", "LevelWindow", "Window", "fill_time", "finish_time"]

#: A steady-state window needs this many requests ...
MIN_REQUESTS = 20
#: ... sent over at least this many seconds.
MIN_SECONDS = 5.0
#: The fill time is the median latency of this many first sends.
_FILL_SENDS = 10


def finish_time(r: RequestRecord) -> float:
    """When a request left the system: its end, else when it was sent or scheduled."""
    if r.end is not None:
        return r.end
    return r.sent if r.sent is not None else r.scheduled


def fill_time(records: Sequence[RequestRecord]) -> float:
    """How long the pipeline takes to fill: the median latency of the first sends.

    Under overload the later requests queue for ever longer, so the median of the whole
    level would cut most of it; the first sends meet an empty server.
    """
    first = sorted(records, key=lambda r: r.scheduled)[:_FILL_SENDS]
    lat = sorted(finish_time(r) - r.scheduled for r in first)
    return lat[len(lat) // 2] if lat else 0.0


@dataclass(frozen=True, slots=True)
class LevelWindow:
    """A resolved window: its bounds, its requests and the throughput span."""

    start: float
    end: float
    #: How the bounds were chosen, e.g. "auto (open loop: filled to last send)".
    method: str
    #: The requests scheduled inside [start, end] (all of them when not steady).
    members: tuple[RequestRecord, ...]
    #: True when the cut window held enough requests and seconds to be used.
    steady: bool
    #: Said beside the figures when the window is not a steady state.
    note: str | None = None

    @property
    def drain(self) -> float:
        """Seconds the window's own requests took to finish after ``end``."""
        if not self.members:
            return 0.0
        return max(0.0, max(finish_time(r) for r in self.members) - self.end)

    @property
    def span_end(self) -> float:
        return self.end + self.drain

    def describe(self) -> dict[str, object]:
        """The ``window`` entry of an aggregate."""
        return {
            "start": self.start,
            "end": self.end,
            "method": self.method,
            "steady": self.steady,
            "note": self.note,
            "requests": len(self.members),
            "sends_s": max(0.0, self.end - self.start),
            "drain_s": self.drain,
            "throughput_span": [self.start, self.span_end],
        }


@dataclass(frozen=True, slots=True)
class Window:
    """How to cut a level's steady state (membership always by intended send time).

    ``method`` is one of:

    - ``"all"``: every request of the level;
    - ``"time"``: requests scheduled from ``warmup`` seconds after the first send to
      ``cooldown`` seconds before the last send;
    - ``"count"``: all but the first ``warmup`` and the last ``cooldown`` sends;
    - ``"auto"``: open loop, from one fill time (the median latency of the first
      sends) after the first send to the last send; closed loop, from the first send
      after in-flight reaches its target to the last send before it starts falling;
    - ``"explicit"``: requests scheduled between the monotonic times ``start`` and ``end``.

    A cut window with fewer than 20 requests or under 5 s of sends falls back to every
    request of the level, marked "no steady state".
    """

    method: str = "all"
    warmup: float = 0.0
    cooldown: float = 0.0
    start: float | None = None
    end: float | None = None

    def resolve(
        self, records: Sequence[RequestRecord], target_concurrency: int | None = None
    ) -> LevelWindow:
        """The window of these records (a level's requests, any order)."""
        recs = sorted(records, key=lambda r: (r.scheduled, r.request_id))
        if not recs:
            return LevelWindow(0.0, 0.0, "empty", (), False, None)
        t0, t_last = recs[0].scheduled, recs[-1].scheduled
        everything = LevelWindow(t0, t_last, "all requests", tuple(recs), False, None)
        if self.method == "all":
            return everything
        bounds = self._bounds(recs, target_concurrency)
        if isinstance(bounds, str):
            return _fallback(everything, bounds)
        start, end, method = bounds
        members = tuple(r for r in recs if start <= r.scheduled <= end)
        if len(members) < MIN_REQUESTS or end - start < MIN_SECONDS:
            why = (
                f"the {method} window holds {len(members)} requests over "
                f"{max(0.0, end - start):.1f} s"
            )
            return _fallback(everything, why)
        return LevelWindow(start, end, method, members, True, None)

    def _bounds(
        self, recs: Sequence[RequestRecord], target: int | None
    ) -> tuple[float, float, str] | str:
        """(start, end, method) of the cut window, or why there is none."""
        t0, t_last = recs[0].scheduled, recs[-1].scheduled
        if self.method == "explicit":
            lo = t0 if self.start is None else self.start
            hi = t_last if self.end is None else self.end
            return lo, hi, "explicit"
        if self.method == "time":
            label = f"time (warmup {self.warmup:g}s, cooldown {self.cooldown:g}s)"
            return t0 + self.warmup, t_last - self.cooldown, label
        if self.method == "count":
            n_lo, n_hi = int(self.warmup), int(self.cooldown)
            if n_lo + n_hi >= len(recs):
                return "the count cuts leave no request"
            label = f"count (warmup {n_lo}, cooldown {n_hi})"
            return recs[n_lo].scheduled, recs[len(recs) - 1 - n_hi].scheduled, label
        if self.method != "auto":
            raise ConfigError(f"unknown window method {self.method!r}")
        if target is None or target <= 0:
            fill = fill_time(recs)
            return (
                t0 + fill,
                t_last,
                f"auto (open loop: from one fill time, {fill:.2f} s, to the last send)",
            )
        return _closed_loop(recs, target)

    @classmethod
    def parse(cls, warmup: str | None, cooldown: str | None) -> Window:
        """From CLI strings: ``auto``, ``10s`` (seconds), ``20`` (requests) or ``0``."""
        w, c = (warmup or "0").strip().lower(), (cooldown or "0").strip().lower()
        wv, wu = (0.0, "n") if w == "auto" else _parse_cut(w, "--warmup")
        cv, cu = (0.0, "n") if c == "auto" else _parse_cut(c, "--cooldown")
        if w == "auto" or c == "auto":
            return cls("auto")
        if wv == 0 and cv == 0:
            return cls("all")
        units = {u for v, u in ((wv, wu), (cv, cu)) if v}
        if len(units) > 1:
            raise ConfigError("--warmup and --cooldown must both be seconds or both counts")
        return cls("time" if units == {"s"} else "count", wv, cv)


def _fallback(everything: LevelWindow, why: str) -> LevelWindow:
    note = (
        f"no steady state ({why}; a steady window needs {MIN_REQUESTS} requests over "
        f"{MIN_SECONDS:g} s): every request of the level counts"
    )
    return LevelWindow(
        everything.start, everything.end, "all requests", everything.members, False, note
    )


def _parse_cut(text: str, flag: str) -> tuple[float, str]:
    try:
        if text.endswith("s"):
            value, unit = float(text[:-1]), "s"
        else:
            value, unit = float(int(text)), "n"
    except ValueError:
        raise ConfigError(
            f"{flag} {text!r}: use 'auto', seconds like '10s' or a request count like '20'"
        ) from None
    if value < 0 or not math.isfinite(value):
        raise ConfigError(f"{flag} must not be negative")
    return value, unit


def _closed_loop(recs: Sequence[RequestRecord], target: int) -> tuple[float, float, str] | str:
    """From the first send at the target in-flight count to the last send before the
    count falls for good. A freed slot is refilled microseconds later, so momentary
    dips are ignored."""
    events: list[tuple[float, int]] = []
    for r in recs:
        events.append((r.scheduled, 1))
        events.append((finish_time(r), -1))
    events.sort()  # at equal times, a finish counts before a send
    level = 0
    first_at: float | None = None
    last_drop: float | None = None
    at_target = False
    for t, delta in events:
        level += delta
        if level >= target:
            if first_at is None:
                first_at = t
            at_target = True
        elif at_target:
            last_drop, at_target = t, False
    if first_at is None or last_drop is None or last_drop <= first_at:
        return f"in-flight never held the target {target}"
    last_send = max(r.scheduled for r in recs if r.scheduled <= last_drop)
    return first_at, last_send, f"auto (closed loop: in flight at target {target})"
