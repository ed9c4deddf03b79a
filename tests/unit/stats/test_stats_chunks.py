"""Pooled ITL from flattened chunks: the one definition aggregates and the report use."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from infersight.core.records import RequestRecord
from infersight.stats.aggregate import aggregate
from infersight.stats.chunks import flatten_chunks, pooled_itl


def _rec(i: int, times: list[float], toks: list[int] | None = None) -> RequestRecord:
    return RequestRecord(
        request_id=str(i),
        scheduled=times[0] - 0.1,
        sent=times[0] - 0.1,
        chunk_times=times,
        chunk_tokens=toks or [1] * len(times),
        end=times[-1],
        ok=True,
        status=200,
    )


def test_pooled_itl_skips_gaps_between_requests_and_weights_by_tokens() -> None:
    recs = [_rec(0, [1.0, 1.5, 1.75], [1, 3, 1]), _rec(1, [10.0]), _rec(2, [20.0, 20.25])]
    vals, w = pooled_itl(recs)
    assert vals.tolist() == [0.5, 0.25, 0.25]
    assert w.tolist() == [3.0, 1.0, 1.0]


def test_chunk_tokens_missing_from_an_old_file_count_one_each() -> None:
    r = _rec(0, [1.0, 1.5, 1.75, 2.0], [1, 4])
    assert flatten_chunks([r]).tokens.tolist() == [1.0, 4.0, 1.0, 1.0]
    assert pooled_itl([r])[1].tolist() == [4.0, 1.0, 1.0]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.lists(st.tuples(st.floats(0.001, 1.0), st.integers(0, 4)), max_size=6), max_size=10)
)
def test_aggregate_itl_is_the_summary_of_the_pooled_gaps(
    spec: list[list[tuple[float, int]]],
) -> None:
    recs, t = [], 0.0
    for i, chunks in enumerate(spec):
        times = [t + 1.0 + sum(g for g, _ in chunks[:k]) for k in range(len(chunks))]
        t = (times[-1] if times else t) + 5.0
        recs.append(
            RequestRecord(
                str(i),
                scheduled=float(i),
                sent=float(i),
                ok=True,
                status=200,
                chunk_times=times,
                chunk_tokens=[k for _, k in chunks],
                end=t - 4.0,
            )
        )
    naive = [
        (b - a, max(k, 1))
        for r in recs
        for a, b, k in zip(r.chunk_times, r.chunk_times[1:], r.chunk_tokens[1:], strict=False)
    ]
    itl = aggregate(recs)["itl"]
    assert itl["count"] == sum(k for _, k in naive)
    if naive:
        pooled = np.repeat([g for g, _ in naive], [k for _, k in naive])
        assert itl["p50"] == float(np.percentile(pooled, 50))
        assert itl["max"] == float(pooled.max())
