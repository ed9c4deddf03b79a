"""Per-request features of the step-time fit (docs/design.md section 9).

Given each request's admission (``start``) and end, the number of requests running is
a step function of time. For the decode fit each request needs the time it spent
decoding at each running count (``tau[i, j]`` seconds at count ``counts[j]``) and the
prompt tokens admitted while it decoded (their prefill steps held up its tokens).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    "DecodeFeatures",
    "decode_features",
    "prefilled_during",
    "step_time",
    "time_at_counts",
]


def step_time(n: np.ndarray | float, a: float, b: float, k: float) -> np.ndarray:
    """Seconds of one decode step with ``n`` sequences running."""
    return a + b * np.maximum(0.0, np.asarray(n, dtype=float) - k)


@dataclass(frozen=True, slots=True)
class DecodeFeatures:
    """The decode fit's inputs for the requests it uses."""

    #: Running counts that occur (columns of ``tau``).
    counts: np.ndarray
    #: Seconds each request decoded at each count.
    tau: np.ndarray
    #: Seconds from first to last token, and the steps (tokens) in between.
    span: np.ndarray
    steps: np.ndarray
    #: Prompt tokens admitted while each request decoded.
    prefill: np.ndarray


def _cumulative(
    start: np.ndarray, end: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Event times, the running count after each, the counts that occur, and the
    cumulative seconds spent at each count up to each event."""
    s = start[np.isfinite(start) & np.isfinite(end)]
    e = end[np.isfinite(start) & np.isfinite(end)]
    times = np.concatenate([s, e])
    step = np.concatenate([np.ones(s.size), -np.ones(e.size)])
    order = np.lexsort((step, times))  # an end before a start at the same instant
    times, step = times[order], step[order]
    running = np.cumsum(step)
    counts = np.unique(running)
    col = np.searchsorted(counts, running)
    dt = np.diff(times, append=times[-1] if times.size else 0.0)
    cum = np.zeros((times.size + 1, counts.size))
    onehot = np.zeros((times.size, counts.size))
    onehot[np.arange(times.size), col] = dt
    cum[1:] = np.cumsum(onehot, axis=0)
    return times, col, counts, cum


def _at(t: np.ndarray, times: np.ndarray, col: np.ndarray, cum: np.ndarray) -> np.ndarray:
    """Cumulative seconds at each count up to each of ``t``."""
    j = np.searchsorted(times, t, side="right") - 1
    out = cum[np.clip(j, 0, None)].copy()
    inside = j >= 0
    out[~inside] = 0.0
    rows = np.flatnonzero(inside)
    out[rows, col[j[rows]]] += t[rows] - times[j[rows]]
    return out


def decode_features(
    start: np.ndarray,
    end: np.ndarray,
    first: np.ndarray,
    last: np.ndarray,
    output: np.ndarray,
    prompt: np.ndarray,
    use: np.ndarray,
) -> DecodeFeatures:
    """Features of the requests ``use`` (indices), from every request's start and end."""
    times, col, counts, cum_full = _cumulative(start, end)
    cum = cum_full[:-1]  # cumulative up to each event time
    a = _at(first[use], times, col, cum)
    b = _at(last[use], times, col, cum)
    tau = np.clip(b - a, 0.0, None)
    ps = np.where(np.isfinite(prompt), prompt, 0.0)
    order = np.argsort(start, kind="stable")
    st = start[order]
    cs = np.concatenate([[0.0], np.cumsum(ps[order])])
    pre = (
        cs[np.searchsorted(st, last[use], side="right")]
        - cs[np.searchsorted(st, first[use], side="right")]
    )
    return DecodeFeatures(
        counts=counts, tau=tau, span=last[use] - first[use], steps=output[use] - 1.0, prefill=pre
    )


def time_at_counts(
    start: np.ndarray, end: np.ndarray, a: np.ndarray, b: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The running counts that occur, and the seconds each interval ``[a, b]`` spent at
    each (rows: intervals)."""
    times, col, counts, cum_full = _cumulative(start, end)
    cum = cum_full[:-1]
    return counts, np.clip(_at(b, times, col, cum) - _at(a, times, col, cum), 0.0, None)


def prefilled_during(
    start: np.ndarray, first: np.ndarray, prompt: np.ndarray, tol: float
) -> np.ndarray:
    """Prompt tokens whose first token came while each request waited for its own
    (after its admission, up to ``tol`` after its first token, its own included): the
    prefill work ahead of and beside it where the engine prefills in batches, as the
    prompts of one step share its end up to the client's time stamps' jitter."""
    ps = np.where(np.isfinite(prompt), prompt, 0.0)
    f = np.where(np.isfinite(first), first, np.inf)
    order = np.argsort(f, kind="stable")
    fs = f[order]
    cs = np.concatenate([[0.0], np.cumsum(ps[order])])
    upto = cs[np.searchsorted(fs, f + tol, side="right")]
    before = cs[np.searchsorted(fs, start, side="right")]
    return np.asarray(np.maximum(upto - before, ps), dtype=float)
