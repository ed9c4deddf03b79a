"""The downsampling of the report's CDF plots, and the percentiles its tables show."""

from __future__ import annotations

from typing import Any

import numpy as np

from infersight.stats.chunks import FloatArray
from infersight.stats.summary import PERCENTILES as _SHARED_PERCENTILES

__all__ = ["PERCENTILES", "cdf_points"]

#: The percentiles every latency summary carries (docs/design.md section 2).
PERCENTILES: tuple[str, ...] = tuple(_SHARED_PERCENTILES)


def cdf_points(values: Any, weights: Any = None, n: int = 160) -> tuple[FloatArray, FloatArray]:
    """Downsample an empirical CDF to about ``n`` quantiles, denser in the tail.

    Returns ``(x, p)``: the value at each cumulative probability ``p``. Sorting once and
    indexing keeps this fast for millions of values, and the tail points (p99, p99.9,
    max) are always present so the plot never hides the outliers.
    """
    v = np.asarray(values, dtype=np.float64)
    mask = np.isfinite(v)
    v = v[mask]
    if v.size == 0:
        return np.empty(0), np.empty(0)
    tail = 1.0 - np.logspace(-1, -4, 13)
    ps = np.unique(np.concatenate([np.linspace(0.0, 1.0, n), tail, [1.0]]))
    if weights is None:
        sv = np.sort(v)
        idx = np.minimum(np.ceil(ps * sv.size).astype(np.int64) - 1, sv.size - 1)
        return sv[np.maximum(idx, 0)], ps
    w = np.asarray(weights, dtype=np.float64)[mask]
    if w.size and np.all(w == w[0]):  # equal weights (one token per chunk): plain sort
        return cdf_points(v, None, n)
    order = np.argsort(v, kind="stable")
    sv, cw = v[order], np.cumsum(w[order])
    cw /= cw[-1]
    idx = np.minimum(np.searchsorted(cw, ps - 1e-12, side="left"), sv.size - 1)
    return sv[idx], ps
