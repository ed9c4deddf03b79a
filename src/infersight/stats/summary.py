"""Exact summary statistics (``docs/design.md`` section 2, "Percentiles").

Percentiles are computed exactly from every sample with numpy's default ("linear")
method, so ``summarize(v)["p99"] == numpy.percentile(v, 99)`` bit for bit. No sketches
are used: at the sizes a benchmark produces (well under 10 million samples) an exact
sort is cheap and removes a source of disagreement between tools.

A weighted summary treats a value with integer weight ``k`` as ``k`` identical samples
(past ``REPEAT_MAX`` samples, computed from the weights to the same definitions).
That is how pooled inter-token latency counts a chunk carrying ``k`` tokens: its gap is
recorded once, with weight ``k`` (docs/design.md section 2).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from infersight.core.errors import DataError

__all__ = ["PERCENTILES", "REPEAT_MAX", "STAT_KEYS", "empty_summary", "summarize"]

#: Percentile keys reported for every metric, with their q in percent.
PERCENTILES: dict[str, float] = {"p50": 50.0, "p90": 90.0, "p95": 95.0, "p99": 99.0, "p99.9": 99.9}
#: Samples past which a weighted summary is computed from its weights, not by making
#: ``k`` copies of each value: a file that claims a million tokens for each of a few
#: hundred requests would take gigabytes.
REPEAT_MAX = 1 << 24
#: Every key of a summary, in display order.
STAT_KEYS: tuple[str, ...] = ("count", "mean", "std", "min", "max", *PERCENTILES)


def empty_summary() -> dict[str, Any]:
    """The summary of no samples: ``count`` 0 and every statistic None."""
    out: dict[str, Any] = dict.fromkeys(STAT_KEYS)
    out["count"] = 0
    return out


def summarize(
    values: Iterable[float] | np.ndarray,
    weights: Iterable[float] | np.ndarray | None = None,
) -> dict[str, Any]:
    """Summarise samples: count, mean, std (population), min, max and percentiles.

    ``count`` is the number of samples (the sum of the weights for a weighted summary).
    With no samples, ``count`` is 0 and every other key is None.

    ``weights`` must be non-negative integers: a value with weight ``k`` counts as ``k``
    samples, and the result equals the unweighted summary of the repeated values.
    """
    arr = _as_array(values)
    if weights is not None:
        w = _as_array(weights)
        if w.shape != arr.shape:
            raise DataError(f"values ({arr.size}) and weights ({w.size}) differ in length")
        if w.size and (np.any(w < 0) or np.any(w != np.floor(w))):
            raise DataError("weights must be non-negative integers (a weight counts samples)")
        total = float(w.sum())
        if total > REPEAT_MAX:
            return _from_weights(arr, w)
        # Exact by construction: k copies of a value are k samples.
        arr = np.repeat(arr, w.astype(np.int64))
    if arr.size == 0:
        return empty_summary()
    if not np.all(np.isfinite(arr)):
        raise DataError("summarize() got a NaN or infinite value")
    pcts = np.percentile(arr, list(PERCENTILES.values()))
    out: dict[str, Any] = {
        "count": int(arr.size),
        "mean": float(np.mean(arr)),
        "std": float(np.std(arr)),
        "min": float(np.min(arr)),
        "max": float(np.max(arr)),
    }
    for key, value in zip(PERCENTILES, pcts, strict=True):
        out[key] = float(value)
    return out


def _from_weights(arr: np.ndarray, w: np.ndarray) -> dict[str, Any]:
    """The summary of ``k`` copies of each value without making them: the same
    definitions as numpy's on the repeated array (float rounding aside)."""
    keep = w > 0
    v, k = arr[keep], w[keep]
    if not np.all(np.isfinite(v)):
        raise DataError("summarize() got a NaN or infinite value")
    order = np.argsort(v, kind="stable")
    v, k = v[order], k[order]
    ends = np.cumsum(k)  # the repeated array's index past each value's last copy
    n = float(ends[-1])
    mean = float(np.dot(v, k) / n)
    out: dict[str, Any] = {
        "count": int(n),
        "mean": mean,
        "std": float(np.sqrt(np.dot(k, (v - mean) ** 2) / n)),
        "min": float(v[0]),
        "max": float(v[-1]),
    }
    for key, q in PERCENTILES.items():
        h = (n - 1) * q / 100.0  # numpy's "linear" method: interpolate at index h
        lo = np.floor(h)
        a, b = v[np.searchsorted(ends, [lo, min(lo + 1, n - 1)], "right")]
        g = h - lo
        # numpy's own lerp, from the nearer end
        out[key] = float(a + (b - a) * g if g < 0.5 else b - (b - a) * (1 - g))
    return out


def _as_array(values: Iterable[float] | np.ndarray) -> np.ndarray:
    if isinstance(values, np.ndarray):
        return values.astype(np.float64, copy=False).ravel()
    if not isinstance(values, Sequence):
        values = list(values)
    return np.asarray(values, dtype=np.float64).ravel()
