"""Unit tests of the report's pieces: downsampling, occupancy, ITL pooling, deltas."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infersight.core.records import RequestRecord, RunResult
from infersight.report.cdf import cdf_points
from infersight.report.compare.rows import delta, fmt_delta, matched_rows
from infersight.report.svg.charts import fmt_value, nice_ticks
from infersight.report.timeline import build_timeline, mean_occupancy
from infersight.report.view import build_view, build_views
from infersight.stats.significance import BETTER, RUN_MORE
from infersight_testkit.synthetic_runs import make_run

finite = st.floats(min_value=0.0, max_value=1e4, allow_nan=False, allow_infinity=False)


@settings(max_examples=60, deadline=None)
@given(st.lists(finite, min_size=1, max_size=400))
def test_cdf_points_are_exact_order_statistics(values: list[float]) -> None:
    xs, ps = cdf_points(values, n=50)
    sv = np.sort(np.asarray(values))
    assert np.all(np.diff(xs) >= 0) and np.all(np.diff(ps) > 0)
    assert xs[-1] == sv[-1] and ps[-1] == 1.0 and xs[0] == sv[0]
    for x, p in zip(xs, ps, strict=True):
        # x is the smallest sample whose empirical CDF reaches p.
        assert np.mean(sv <= x) >= p - 1e-9
        if p > 0:
            assert np.mean(sv < x) < p + 1e-9


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(finite, st.integers(1, 5)), min_size=1, max_size=200))
def test_weighted_cdf_equals_cdf_of_repeated_values(pairs: list[tuple[float, int]]) -> None:
    vals = np.asarray([v for v, _ in pairs])
    w = np.asarray([k for _, k in pairs], dtype=float)
    xw, pw = cdf_points(vals, w, n=40)
    xr, pr = cdf_points(np.repeat(vals, w.astype(int)), None, n=40)
    assert np.array_equal(pw, pr)
    assert np.allclose(xw, xr)


def test_cdf_points_downsamples_large_inputs_and_keeps_the_tail() -> None:
    v = np.random.default_rng(1).exponential(1.0, 1_000_000)
    xs, ps = cdf_points(v)
    assert len(xs) < 200
    assert xs[-1] == v.max()
    i = int(np.argmin(np.abs(ps - 0.999)))
    assert abs(ps[i] - 0.999) < 1e-9 and xs[i] == np.quantile(v, 0.999, method="inverted_cdf")


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.tuples(finite, st.floats(0, 50, allow_nan=False)), min_size=1, max_size=60),
    st.integers(1, 30),
)
def test_mean_occupancy_matches_a_brute_force_integral(
    spans: list[tuple[float, float]], nbins: int
) -> None:
    starts = np.asarray([s for s, _ in spans])
    ends = starts + np.asarray([d for _, d in spans])
    edges = np.linspace(0.0, float(ends.max()) + 1.0, nbins + 1)
    got = mean_occupancy(starts, ends, edges)
    for b in range(nbins):
        lo, hi = edges[b], edges[b + 1]
        overlap = np.clip(np.minimum(ends, hi) - np.maximum(starts, lo), 0, None).sum()
        assert math.isclose(got[b], overlap / (hi - lo), rel_tol=1e-6, abs_tol=1e-6)


def test_timeline_counts_in_flight_queued_tokens_and_errors() -> None:
    run = make_run(900, levels=(2, 16), seed=3, error_rate=0.05)
    view = build_view(run)
    tl = build_timeline(run.records, view.t0, bins=50)
    assert tl is not None
    # Tokens over time integrate to every chunk's tokens.
    total = sum(sum(r.chunk_tokens) for r in run.records)
    assert math.isclose(float(tl.output_tok_s.sum() * tl.width), total, rel_tol=1e-9)
    failed = sum(1 for r in run.records if not r.ok)
    assert sum(float(c.sum()) for c in tl.errors.values()) == failed
    # The c=16 level (above 8 slots) queues in the gateway; c=2 does not.
    half = len(tl.centers) // 2
    assert tl.queued[half + 5 :].max() > 1.0
    assert tl.in_flight[half + 5 :].mean() > tl.in_flight[: half - 5].mean()


@settings(max_examples=100, deadline=None)
@given(st.floats(0.001, 1e3), st.floats(0.001, 1e3))
def test_delta_is_the_change_and_its_percent(base: float, new: float) -> None:
    d, pct = delta(base, new)
    assert d is not None and pct is not None
    assert math.isclose(d, new - base) and math.isclose(pct, (new - base) / base * 100)


def test_delta_edge_cases_and_formatting() -> None:
    assert delta(None, 1.0) == (None, None)
    assert delta(0.0, 2.0) == (2.0, None)
    assert fmt_delta(-0.012, "frac") == "-1.2 pp"
    assert fmt_delta(0.0123, "s") == "+12.3 ms"
    assert fmt_delta(-2.5, "$") == "-$2.5"
    assert fmt_value(2.5e-4, "s") == "250 µs" and fmt_value(1.5, "s") == "1.5 s"
    assert nice_ticks(0, 1, 5) == [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]


def test_comparison_rows_take_values_from_the_aggregates() -> None:
    before = make_run(900, levels=(1, 8), seed=4, run_id="before")
    after = make_run(900, levels=(1, 8), seed=4, base_itl=0.005, run_id="after")
    vb, va = build_views([before, after])
    _, (level, _, rows_8) = matched_rows([vb, va])
    assert level == "c=8"
    rows = {r.metric: r for r in rows_8}
    assert rows["e2e p99"].values == [
        vb.levels[1].agg["e2e"]["p99"],
        va.levels[1].agg["e2e"]["p99"],
    ]
    assert rows["ITL p99"].better == "lower"
    # Halving the decode step makes e2e better and throughput higher, beyond the noise.
    for m in ("e2e p50", "output tok/s"):
        c = rows[m].call(1)
        assert c is not None and c.call == BETTER, (m, c)
    # 450 requests a level: a p99 is not called, whichever way it moved.
    c99 = rows["e2e p99"].call(1)
    assert c99 is not None and c99.call == RUN_MORE and "1,000 requests" in c99.note
    assert rows["success rate"].call(1) is None  # no statistical basis: change only
    assert "GPU util gpu0 mean" in rows and rows["GPU util gpu0 mean"].better is None
    assert rows["$ per run"].values == [0.0, 0.0]  # the embedded model's price is $0


def test_report_a_b_c_widens_every_interval_for_the_family() -> None:
    runs = [make_run(600, levels=(4,), seed=s, run_id=f"r{s}") for s in (4, 5, 6)]
    two = matched_rows(build_views(runs[:2]))
    three = matched_rows(build_views(runs))
    c2 = {r.metric: r.call(1) for r in two[0][2]}
    c3 = {r.metric: r.call(1) for r in three[0][2]}
    assert c2["requests/s"] is not None and c2["requests/s"].confidence == 0.95
    got = c3["requests/s"]
    assert got is not None and got.confidence == pytest.approx(0.975)
    assert {r.metric: r.call(2) for r in three[0][2]}["requests/s"].confidence == got.confidence
    # B against A is the same data either way: only the interval widened.
    lo2 = c2["requests/s"].low
    assert got.ratio == c2["requests/s"].ratio
    assert got.low is not None and lo2 is not None and got.low < lo2


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.lists(st.floats(0.001, 1.0), max_size=6), st.booleans()), max_size=12))
def test_pooled_itl_of_ok_records_matches_a_naive_loop(
    spec: list[tuple[list[float], bool]],
) -> None:
    recs, t = [], 0.0
    for i, (gaps, ok) in enumerate(spec):
        times = [t + 1.0 + sum(gaps[:k]) for k in range(len(gaps))]
        t = (times[-1] if times else t) + 5.0
        recs.append(
            RequestRecord(
                request_id=str(i),
                scheduled=0.0,
                chunk_times=times,
                chunk_tokens=[k % 3 + 1 for k in range(len(times))],
                ok=ok,
            )
        )
    lv = build_view(RunResult(records=recs)).levels[0] if recs else None
    naive = [
        (b - a, k)
        for r in recs
        if r.ok
        for a, b, k in zip(r.chunk_times, r.chunk_times[1:], r.chunk_tokens[1:], strict=False)
    ]
    if lv is None:
        return
    vals, w = lv.itl()
    assert np.allclose(vals, [g for g, _ in naive]) and w.tolist() == [float(k) for _, k in naive]


def test_big_runs_are_downsampled_in_the_page() -> None:
    from infersight.report import render_html

    run = make_run(20_000, levels=(1, 4, 16, 32), seed=8, tokens=(4, 24))
    html = render_html(run)
    assert len(html) < 600_000  # size does not grow with the number of requests
    import re

    for pts in re.findall(r'<polyline[^>]* points="([^"]*)"', html):
        assert len(pts.split()) <= 2 * 240 + 2  # a step line over at most 240 bins
