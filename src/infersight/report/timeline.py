"""Binned time series from the records: in flight, queued, throughput, errors.

A 100,000-request run becomes a few hundred bins. Occupancy (in flight, queued) is the
exact time-average over each bin, computed from sorted interval endpoints and prefix
sums, so short requests are neither lost between sample points nor double counted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from infersight.core.records import RequestRecord
from infersight.report.view import record_end
from infersight.stats.chunks import Chunks, FloatArray, flatten_chunks

__all__ = ["Timeline", "binned_means", "build_timeline", "mean_occupancy"]


@dataclass
class Timeline:
    """Bin centres (s from run start) and the series drawn in the timeline charts."""

    centers: FloatArray
    width: float
    in_flight: FloatArray
    queued: FloatArray
    output_tok_s: FloatArray
    errors: dict[str, FloatArray] = field(default_factory=dict)


def mean_occupancy(starts: FloatArray, ends: FloatArray, edges: FloatArray) -> FloatArray:
    """Time-averaged number of open intervals ``[start, end)`` in each bin of ``edges``.

    The integral of the open-interval count up to ``t`` is
    ``sum(t - s for s <= t) - sum(t - e for e <= t)``; differencing it at the bin
    edges and dividing by the bin width gives the exact mean over each bin.
    """
    ends = np.maximum(ends, starts)
    s, e = np.sort(starts), np.sort(ends)
    cs = np.concatenate([[0.0], np.cumsum(s)])
    ce = np.concatenate([[0.0], np.cumsum(e)])
    ks = np.searchsorted(s, edges, side="right")
    ke = np.searchsorted(e, edges, side="right")
    integral = (ks * edges - cs[ks]) - (ke * edges - ce[ke])
    widths = np.diff(edges)
    widths[widths <= 0] = 1.0
    out: FloatArray = np.diff(integral) / widths
    return np.maximum(out, 0.0)


def binned_means(ts: FloatArray, vs: FloatArray, edges: FloatArray) -> FloatArray:
    """Mean of the values whose time falls in each bin (NaN where a bin has none)."""
    sums, _ = np.histogram(ts, bins=edges, weights=vs)
    counts, _ = np.histogram(ts, bins=edges)
    with np.errstate(invalid="ignore", divide="ignore"):
        out: FloatArray = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
    return out


def build_timeline(
    records: Sequence[RequestRecord],
    t0: float,
    *,
    bins: int = 240,
    max_error_kinds: int = 4,
    chunks: Chunks | None = None,
) -> Timeline | None:
    """Bin the run's records on a time axis starting at ``t0``; None without records.

    ``chunks`` passes the records' already flattened chunks (same order) to save a pass.
    """
    if not records:
        return None
    n = len(records)
    starts = np.fromiter((r.scheduled for r in records), np.float64, n) - t0
    ends = np.fromiter((record_end(r) for r in records), np.float64, n) - t0
    # Queued: waiting in the client (scheduled..sent) and then in a gateway queue.
    q_end = (
        np.fromiter(
            (
                (r.sent + (r.queue_delay or 0.0)) if r.sent is not None else record_end(r)
                for r in records
            ),
            np.float64,
            n,
        )
        - t0
    )
    t_end = float(max(ends.max(), starts.max()))
    span = t_end if t_end > 0 else 1.0
    ch = chunks if chunks is not None else flatten_chunks(records)
    # Aim for ~10 chunks per bin so short runs are not all noise; at most ``bins``.
    nb = int(np.clip(max(ch.times.size, n) / 10, min(30, bins), bins))
    edges = np.linspace(0.0, span, nb + 1)
    width = span / nb
    centers = (edges[:-1] + edges[1:]) / 2

    toks, _ = np.histogram(ch.times - t0, bins=edges, weights=ch.tokens)

    failed = [r for r in records if not r.ok and not r.cancelled]
    kinds = Counter(r.error or "unknown" for r in failed)
    top = [k for k, _ in kinds.most_common(max_error_kinds)]
    errors: dict[str, FloatArray] = {}
    for kind in top + (["other"] if len(kinds) > len(top) else []):
        ts = np.asarray(
            [
                record_end(r) - t0
                for r in failed
                if (r.error or "unknown") == kind
                or (kind == "other" and (r.error or "unknown") not in top)
            ],
            dtype=np.float64,
        )
        counts, _ = np.histogram(ts, bins=edges)
        errors[kind] = counts.astype(np.float64)
    return Timeline(
        centers=centers,
        width=width,
        in_flight=mean_occupancy(starts, ends, edges),
        queued=mean_occupancy(starts, np.maximum(q_end, starts), edges),
        output_tok_s=toks / width,
        errors=errors,
    )
