"""Per-level aggregates for the report, and the downsampling helpers for its plots.

The report shows the aggregates stored in the RunResult (what the console printed)
and recomputes them with ``infersight.core.metrics.aggregate`` only when a level has
none, so report and console never disagree.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any

import numpy as np
import numpy.typing as npt

from infersight.core.records import RequestRecord
from infersight.core.stats import PERCENTILES as _SHARED_PERCENTILES

__all__ = [
    "PERCENTILES",
    "Chunks",
    "cdf_points",
    "flatten_chunks",
    "itl_from_chunks",
    "level_aggregate",
    "pooled_itl",
]

FloatArray = npt.NDArray[np.float64]

#: The percentiles every latency summary carries (design.md section 2).
PERCENTILES: tuple[str, ...] = tuple(_SHARED_PERCENTILES)


@dataclass(frozen=True)
class Chunks:
    """Every content chunk of a list of records, flattened: time, tokens, per-record count."""

    times: FloatArray
    tokens: FloatArray
    lens: npt.NDArray[np.int64]

    def select(self, mask: npt.NDArray[np.bool_]) -> Chunks:
        """The chunks of the records where ``mask`` is true."""
        flat = np.repeat(mask, self.lens)
        return Chunks(self.times[flat], self.tokens[flat], self.lens[mask])


def flatten_chunks(records: Sequence[RequestRecord]) -> Chunks:
    """One pass over the records into flat numpy arrays (the slow, Python-level part)."""
    lens = np.fromiter((len(r.chunk_times) for r in records), np.int64, len(records))
    total = int(lens.sum())
    times = np.fromiter(chain.from_iterable(r.chunk_times for r in records), np.float64, total)
    tokens = np.fromiter(
        chain.from_iterable(
            r.chunk_tokens
            if len(r.chunk_tokens) == len(r.chunk_times)
            else [1] * len(r.chunk_times)
            for r in records
        ),
        np.float64,
        total,
    )
    return Chunks(times, tokens, lens)


def itl_from_chunks(chunks: Chunks) -> tuple[FloatArray, FloatArray]:
    """Inter-chunk gaps within each record, weighted by the tokens of the later chunk."""
    lens = chunks.lens[chunks.lens > 0]
    if chunks.times.size < 2:
        return np.empty(0), np.empty(0)
    gaps = np.diff(chunks.times)
    keep = np.ones(gaps.size, dtype=bool)
    keep[np.cumsum(lens)[:-1] - 1] = False  # the gap between two requests is not an ITL
    return gaps[keep], np.maximum(chunks.tokens[1:][keep], 1.0)


def pooled_itl(records: Sequence[RequestRecord]) -> tuple[FloatArray, FloatArray]:
    """Every inter-chunk gap of the records (pooled ITL, design.md section 2) and weights."""
    return itl_from_chunks(flatten_chunks(records))


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
