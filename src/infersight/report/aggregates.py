"""Per-level aggregates for the report, and the downsampling of its CDF plots.

The report shows the aggregates stored in the RunResult (what the console printed)
and recomputes them with ``infersight.core.metrics.aggregate`` only when a level has
none, so report and console never disagree.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from infersight.core.chunks import FloatArray
from infersight.core.records import RequestRecord
from infersight.core.stats import PERCENTILES as _SHARED_PERCENTILES

__all__ = ["PERCENTILES", "cdf_points", "level_aggregate"]

#: The percentiles every latency summary carries (design.md section 2).
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


def level_aggregate(
    stored: Any, records: Sequence[RequestRecord], level: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The aggregate the run stored (what the console printed), else recomputed.

    Recomputing uses the same ``core.metrics.aggregate`` as ``bench``, with the level's
    target concurrency or rate from ``config["levels"]``, so the numbers agree.
    """
    if isinstance(stored, dict) and stored:
        return stored
    from infersight.core.metrics import aggregate

    level = level or {}
    conc, rate = level.get("concurrency"), level.get("rate")
    out: dict[str, Any] = aggregate(
        list(records),
        target_concurrency=int(conc) if isinstance(conc, int | float) else None,
        target_rate=float(rate) if isinstance(rate, int | float) else None,
    )
    return out
