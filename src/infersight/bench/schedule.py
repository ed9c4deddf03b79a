"""Load strategies: precomputed schedules of send times.

An open-loop strategy returns every intended send time before the run starts, as
offsets in seconds from the level's start. The scheduler adds the start time and
sends at those instants; latency counts from them (no coordinated omission: a client
that falls behind shows it as schedule lag and larger TTFT, it does not silently
send later and report shorter latencies).

- ``constant``: evenly spaced at ``rate``/s.
- ``poisson``: exponential gaps with mean ``1/rate``.
- ``gamma``: gamma gaps with mean ``1/rate`` and shape ``burstiness``: 1 is Poisson,
  below 1 burstier (coefficient of variation ``1/sqrt(burstiness)``), above 1 more even.
- ``all-at-once`` (``rate = inf``): every request at offset 0, the throughput level.

A closed loop (``concurrency N``) has no precomputed times: each of N users sends its
next request the moment its previous one ends, and that moment is its intended send
time.
"""

from __future__ import annotations

import math

import numpy as np

from infersight.core.errors import ConfigError

__all__ = ["open_loop_schedule"]


def open_loop_schedule(
    rate: float,
    *,
    arrival: str = "constant",
    burstiness: float = 1.0,
    requests: int | None = None,
    duration: float | None = None,
    seed: int = 0,
) -> np.ndarray:
    """Send-time offsets (seconds from the level start), sorted, first at 0.

    At least one of ``requests`` and ``duration`` bounds the schedule; with both, the
    first reached ends it. The same seed gives the same schedule.
    """
    if requests is None and duration is None:
        raise ConfigError("an open-loop schedule needs requests and/or duration")
    if not rate > 0:
        raise ConfigError("rate must be > 0")
    if math.isinf(rate):
        if requests is None:
            raise ConfigError("the all-at-once level needs a request count")
        return np.zeros(requests)
    if arrival not in ("constant", "poisson", "gamma"):
        raise ConfigError(f"unknown arrival process {arrival!r}")
    cap = requests if requests is not None else math.ceil(rate * (duration or 0.0)) + 1
    if arrival == "constant":
        offsets = np.arange(cap, dtype=np.float64) / rate
    else:
        rng = np.random.default_rng(seed)
        need = cap - 1
        if duration is not None and requests is None:
            # Draw enough gaps to pass the duration almost surely, then cut.
            need = int(cap + 6 * math.sqrt(cap / min(burstiness, 1.0)) + 10)
        if arrival == "poisson" or burstiness == 1.0:
            gaps = rng.exponential(1.0 / rate, size=need)
        else:
            gaps = rng.gamma(shape=burstiness, scale=1.0 / (rate * burstiness), size=need)
        offsets = np.concatenate(([0.0], np.cumsum(gaps)))
    if duration is not None:
        offsets = offsets[offsets < duration]
    if requests is not None:
        offsets = offsets[:requests]
    return offsets
