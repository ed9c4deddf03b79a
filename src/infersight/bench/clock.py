"""Map a remote load generator's monotonic clock onto the driver's.

Monotonic clocks of different hosts share no origin, so a worker on another host
reports its timestamps on its own axis. The driver measures the offset with probes:
it notes its clock when it asks (``sent``), the worker answers with its clock
(``remote``), and the driver notes its clock again when the answer arrives
(``received``). Whatever the delays on the way out and back, the worker read its clock
between the driver's two readings, so the true offset (driver time minus worker time
at the same instant) lies in ``[sent - remote, received - remote]``: the midpoint is
off by at most half the round trip. Of several probes the one with the shortest round
trip gives the tightest bound; that is the estimate, and half its round trip is its
uncertainty (round-trip bounded, no assumption about symmetric delays).

Clocks drift against each other (NTP slews them independently), so long runs measure
again: two estimates whose intervals do not overlap prove a drift of at least the gap
between them (:func:`proven_drift`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from infersight.core.errors import DataError
from infersight.core.records import RequestRecord, Sample

__all__ = [
    "ClockProbe",
    "OffsetEstimate",
    "estimate_offset",
    "proven_drift",
    "shift_record",
    "shift_sample",
]


@dataclass(frozen=True, slots=True)
class ClockProbe:
    """One round trip: the driver's clock before and after, the worker's in between."""

    sent: float
    remote: float
    received: float

    @property
    def rtt(self) -> float:
        return self.received - self.sent

    @property
    def offset(self) -> float:
        """Driver time minus worker time, from the midpoint of the round trip."""
        return (self.sent + self.received) / 2.0 - self.remote


@dataclass(frozen=True, slots=True)
class OffsetEstimate:
    """``driver_time = worker_time + offset``, good to ``± uncertainty`` seconds."""

    offset: float
    uncertainty: float
    #: The driver's clock at the chosen probe's midpoint (when it was measured).
    at: float
    rtt: float
    probes: int

    @property
    def low(self) -> float:
        return self.offset - self.uncertainty

    @property
    def high(self) -> float:
        return self.offset + self.uncertainty

    def as_dict(self) -> dict[str, Any]:
        return {
            "offset_s": self.offset,
            "uncertainty_s": self.uncertainty,
            "at": self.at,
            "rtt_s": self.rtt,
            "probes": self.probes,
        }


def estimate_offset(probes: Iterable[ClockProbe]) -> OffsetEstimate:
    """The minimum-round-trip probe's offset, with half its round trip as uncertainty."""
    probes = list(probes)
    valid = [p for p in probes if p.rtt >= 0.0]
    if not valid:
        raise DataError("no clock probe came back (or the driver's clock went backwards)")
    best = min(valid, key=lambda p: p.rtt)
    return OffsetEstimate(
        offset=best.offset,
        uncertainty=best.rtt / 2.0,
        at=(best.sent + best.received) / 2.0,
        rtt=best.rtt,
        probes=len(probes),
    )


def proven_drift(a: OffsetEstimate, b: OffsetEstimate) -> float:
    """How far apart two estimates' intervals are (0 when they overlap): the drift the
    measurements prove, whatever their noise."""
    return max(0.0, b.low - a.high, a.low - b.high)


def shift_record(rec: RequestRecord, offset: float) -> None:
    """Move every timestamp of ``rec`` by ``offset`` (in place).

    One offset for the whole record keeps its durations (TTFT, ITL, end to end)
    exactly as the worker measured them.
    """
    rec.scheduled += offset
    if rec.sent is not None:
        rec.sent += offset
    if rec.headers is not None:
        rec.headers += offset
    if rec.end is not None:
        rec.end += offset
    rec.chunk_times = [t + offset for t in rec.chunk_times]


def shift_sample(s: Sample, offset: float, labels: dict[str, str]) -> Sample:
    """``s`` on the driver's axis, with ``labels`` added (say which host took it)."""
    return Sample(s.t + offset, s.name, s.value, {**s.labels, **labels})
