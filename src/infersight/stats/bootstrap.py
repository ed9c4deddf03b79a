"""Intervals for the ratio of two percentiles (docs/design.md section 2, "Comparing
runs"): a bootstrap over requests within a level.

Each side is resampled on its own, with its own size, so the interval's coverage does
not assume the two runs are equally long or equally large (a pooled or time-sliced
variance does). The interval is the percentile bootstrap of B's percentile over A's.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["quantile_ratio_interval"]

#: Resamples per interval: enough for the 2.5% and 97.5% points to be stable.
BOOTSTRAP_REPS = 2000
#: Resamples drawn at once, to bound memory (reps x requests floats).
_BATCH = 250


def _boot_quantiles(x: np.ndarray, q: float, reps: int, rng: np.random.Generator) -> np.ndarray:
    out = []
    for start in range(0, reps, _BATCH):
        k = min(_BATCH, reps - start)
        idx = rng.integers(0, x.size, size=(k, x.size))
        out.append(np.percentile(x[idx], q, axis=1))
    return np.concatenate(out)


def quantile_ratio_interval(
    a: Sequence[float] | np.ndarray,
    b: Sequence[float] | np.ndarray,
    q: float,
    *,
    confidence: float = 0.95,
    reps: int = BOOTSTRAP_REPS,
    seed: int = 0,
) -> tuple[float | None, float | None, float | None]:
    """(B's q-th percentile / A's, low, high) at ``confidence``; Nones with fewer than
    two values a side or A's percentile at 0. A fixed ``seed`` makes reports repeatable."""
    xa, xb = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if xa.size < 2 or xb.size < 2:
        return None, None, None
    pa, pb = float(np.percentile(xa, q)), float(np.percentile(xb, q))
    if pa <= 0:
        return None, None, None
    rng = np.random.default_rng(seed)
    ba, bb = _boot_quantiles(xa, q, reps, rng), _boot_quantiles(xb, q, reps, rng)
    ok = ba > 0
    ratios = bb[ok] / ba[ok]
    tail = (1.0 - confidence) / 2.0 * 100.0
    low, high = np.percentile(ratios, [tail, 100.0 - tail])
    return pb / pa, float(low), float(high)
