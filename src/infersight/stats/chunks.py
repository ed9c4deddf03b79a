"""Content chunks of many records as flat arrays, and pooled ITL (docs/design.md section 2).

Pooled inter-token latency is every gap between two content chunks of the same
request, pooled over requests; a chunk that carries ``k`` tokens counts its gap with
weight ``k``. The aggregates (``stats.aggregate``) and the report's CDFs and timelines
all take it from here, so every output shows the same numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain

import numpy as np
import numpy.typing as npt

from infersight.core.records import RequestRecord

__all__ = ["Chunks", "FloatArray", "flatten_chunks", "itl_from_chunks", "pooled_itl"]

FloatArray = npt.NDArray[np.float64]


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


def _tokens(r: RequestRecord) -> list[int]:
    # One token per chunk the server did not count (a record always has as many
    # counts as chunks; older files may not).
    n, tk = len(r.chunk_times), r.chunk_tokens
    return tk if len(tk) == n else [*tk[:n], *[1] * (n - len(tk))]


def flatten_chunks(records: Sequence[RequestRecord]) -> Chunks:
    """One pass over the records into flat numpy arrays (the slow, Python-level part)."""
    lens = np.fromiter((len(r.chunk_times) for r in records), np.int64, len(records))
    total = int(lens.sum())
    times = np.fromiter(chain.from_iterable(r.chunk_times for r in records), np.float64, total)
    tokens = np.fromiter(chain.from_iterable(_tokens(r) for r in records), np.float64, total)
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
    """Every inter-chunk gap of the records (pooled ITL) and its token weight."""
    return itl_from_chunks(flatten_chunks(records))
