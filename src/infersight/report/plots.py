"""The report's charts, built from RunViews as inline SVG strings."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from infersight.core.numbers import number_at
from infersight.report.cdf import cdf_points
from infersight.report.svg.charts import PALETTE, Band, Series, chart
from infersight.report.timeline import Timeline, binned_means, build_timeline
from infersight.report.view import LevelView, RunView
from infersight.stats.chunks import Chunks, FloatArray

__all__ = ["cdf_charts", "compare_cdf_charts", "throughput_latency_charts", "timeline_charts"]

#: Metrics with a CDF: (title, record attribute or "itl", axis label).
CDF_METRICS = (
    ("TTFT", "ttft", "time to first token (from intended send)"),
    ("ITL", "itl", "inter-token latency (pooled, token-weighted)"),
    ("e2e latency", "e2e", "end-to-end latency (from intended send)"),
)
MAX_TIMELINE_POINTS = 600


def _color(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def _cdf_series(lv: LevelView, metric: str) -> tuple[FloatArray, FloatArray]:
    if metric == "itl":
        vals, w = lv.itl()
        return cdf_points(vals, w)
    return cdf_points(lv.ok_values(metric))


def _want_log(series: Sequence[Series]) -> bool:
    xs = [x for s in series for x in s.xs if x > 0]
    return bool(xs) and max(xs) / min(xs) > 30


def _cdf_chart(title: str, label: str, series: list[Series]) -> str:
    return chart(
        series,
        title=f"{title} CDF",
        xlabel=label + (" (log scale)" if _want_log(series) else ""),
        ylabel="fraction of requests ≤ x",
        xunit="s",
        yunit="frac",
        xlog=_want_log(series),
        ymax=1.0,
        width=356,
        height=290,
    )


def cdf_charts(view: RunView, max_levels: int = len(PALETTE)) -> list[str]:
    """TTFT, ITL and e2e CDFs, one line per load level."""
    levels = view.levels
    if len(levels) > max_levels:  # keep the chart readable: evenly spaced levels
        idx = np.unique(np.linspace(0, len(levels) - 1, max_levels).round().astype(int))
        levels = [levels[i] for i in idx]
    out = []
    for title, metric, label in CDF_METRICS:
        series = []
        for i, lv in enumerate(levels):
            xs, ps = _cdf_series(lv, metric)
            series.append(Series(lv.name, xs.tolist(), ps.tolist(), _color(i), kind="step"))
        out.append(_cdf_chart(title, label, series))
    return out


def compare_cdf_charts(
    views: Sequence[RunView], matched: Sequence[LevelView], level: str
) -> list[str]:
    """The same CDFs overlaid across runs, for one matched level."""
    out = []
    for title, metric, label in CDF_METRICS:
        series = []
        for i, (v, lv) in enumerate(zip(views, matched, strict=True)):
            xs, ps = _cdf_series(lv, metric)
            series.append(
                Series(v.label, xs.tolist(), ps.tolist(), _color(i), kind="step", dash=i > 0)
            )
        out.append(_cdf_chart(f"{title} ({level})", label, series))
    return out


def throughput_latency_charts(view: RunView) -> list[str]:
    """Latency percentiles against output token throughput, one point per level."""
    out = []
    names = [lv.name for lv in view.levels]
    thr = [number_at(lv.agg, "output_token_throughput") for lv in view.levels]
    for metric, title in (("ttft", "TTFT"), ("e2e", "e2e latency")):
        series = []
        for j, (q, dash) in enumerate((("p50", False), ("p99", True))):
            pairs: list[tuple[float, float, str]] = []
            for t, lv, n in zip(thr, view.levels, names, strict=True):
                y = number_at(lv.agg, metric, q)
                if t is not None and y is not None:
                    pairs.append((t, y, n))
            series.append(
                Series(
                    f"{title} {q}",
                    [p[0] for p in pairs],
                    [p[1] for p in pairs],
                    _color(j),
                    kind="points",
                    dash=dash,
                    point_labels=[p[2] for p in pairs] if j == 1 else None,
                )
            )
        out.append(
            chart(
                series,
                title=f"Throughput vs {title} per load level",
                xlabel="output tokens/s",
                ylabel=title,
                yunit="s",
            )
        )
    return out


def _bands(view: RunView) -> list[Band]:
    if len(view.levels) < 2:
        return []
    return [Band(lv.span[0], lv.span[1], lv.name) for lv in view.levels]


def _engine_series(view: RunView, edges: FloatArray) -> list[Series]:
    out = []
    for i, (name, label) in enumerate(
        (
            ("engine.requests_running", "engine running"),
            ("engine.requests_waiting", "engine waiting"),
        )
    ):
        pts = [
            (s.t - view.t0, s.value)
            for s in view.result.samples
            if s.name == name and s.value is not None
        ]
        if not pts:
            continue
        ts = np.asarray([p[0] for p in pts], dtype=np.float64)
        vs = np.asarray([p[1] for p in pts], dtype=np.float64)
        if ts.size > MAX_TIMELINE_POINTS:
            vs, ts = binned_means(ts, vs, edges), (edges[:-1] + edges[1:]) / 2
        series_color = _color(2 + i)
        out.append(Series(label, ts.tolist(), vs.tolist(), series_color, kind="step", dash=True))
    return out


def _util_chart(view: RunView, edges: FloatArray, bands: list[Band]) -> str:
    """Utilisation per source over time, binned to ``edges`` when there are many samples.

    GPU and host utilisation (0-100% of the device or of all cores) are on the left
    axis; a process's CPU, in % of one core (above 100% on several cores), has its own
    axis on the right, so the two scales never share one.
    """
    series = []
    device = any(not is_per_core(n) for n in view.util)
    for i, (name, (ts, vs)) in enumerate(view.util.items()):
        if ts.size > MAX_TIMELINE_POINTS:
            vs, ts = binned_means(ts, vs, edges), (edges[:-1] + edges[1:]) / 2
        per_core = is_per_core(name)
        series.append(
            Series(
                name,
                ts.tolist(),
                vs.tolist(),
                _color(i),
                dash="SM" in name or per_core,
                right=per_core and device,
            )
        )
    right = device and any(s.right for s in series)
    return chart(
        series,
        title="Utilisation over time",
        xlabel="seconds since run start",
        ylabel="% of the GPU / of all host cores" if device else "process CPU, % of one core",
        yunit="%",
        ymax=100.0 if device else None,
        y2label="process CPU, % of one core" if right else "",
        y2unit="%" if right else "",
        bands=bands,
        width=1060,
        height=240,
    )


def is_per_core(series_name: str) -> bool:
    """A process's CPU series, in % of one core (the others are 0-100% of a whole)."""
    return series_name.endswith("(% core)")


def timeline_charts(view: RunView, bins: int = 240) -> list[str]:
    """In flight and queued, throughput, utilisation and errors over time."""
    records = [r for lv in view.levels for r in lv.records]
    parts = [lv.chunks() for lv in view.levels]
    chunks = (
        Chunks(
            np.concatenate([c.times for c in parts]),
            np.concatenate([c.tokens for c in parts]),
            np.concatenate([c.lens for c in parts]),
        )
        if parts
        else None
    )
    tl: Timeline | None = build_timeline(records, view.t0, bins=bins, chunks=chunks)
    if tl is None:  # e.g. a monitor recording: samples, no requests
        if not view.util:
            return []
        t_max = max(float(ts.max()) for ts, _ in view.util.values() if ts.size)
        return [_util_chart(view, np.linspace(0.0, max(t_max, 1.0), bins + 1), [])]
    bands = _bands(view)
    edges = np.concatenate([tl.centers - tl.width / 2, [tl.centers[-1] + tl.width / 2]])
    xs = tl.centers.tolist()
    charts = [
        chart(
            [
                Series("in flight (client)", xs, tl.in_flight.tolist(), _color(0), kind="step"),
                Series("queued (client + gateway)", xs, tl.queued.tolist(), _color(1), kind="step"),
                *_engine_series(view, edges),
            ],
            title="Requests in flight and queued",
            xlabel="seconds since run start",
            ylabel="requests (mean per bin)",
            bands=bands,
            width=1060,
        ),
        chart(
            [Series("output tokens/s", xs, tl.output_tok_s.tolist(), _color(2), kind="step")],
            title="Output token throughput over time",
            xlabel="seconds since run start",
            ylabel="tokens/s",
            bands=bands,
            width=1060,
            height=240,
        ),
    ]
    if view.util:
        charts.append(_util_chart(view, edges, bands))
    if tl.errors:
        base = np.zeros_like(tl.centers)
        series = []
        for i, (kind, counts) in enumerate(tl.errors.items()):
            series.append(
                Series(kind, xs, counts.tolist(), _color(i + 1), kind="bars", base=base.tolist())
            )
            base = base + counts
        charts.append(
            chart(
                series,
                title=f"Errors over time (per {tl.width:.3g} s bin)",
                xlabel="seconds since run start",
                ylabel="failed requests",
                bands=bands,
                width=1060,
                height=220,
            )
        )
    return charts
