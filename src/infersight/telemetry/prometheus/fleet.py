"""Read a fleet from Prometheus: discover the engines, exporters and replicas in a
range, then read every signal page by page (a fixed number of points per series per
page, so memory does not grow with the range).

    async with PrometheusClient(url, auth) as prom:
        fleet = await discover_fleet(prom, start=t0, end=t1, step=15, selector='{namespace="llm"}')
        async for page in fleet.pages(window=300):
            ...  # FleetPage: replica id -> normalised series over [page.start, page.end)
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass, field

import numpy as np
import yaml

from infersight.core.engines import engine_specs
from infersight.core.errors import ConfigError, InfersightError
from infersight.core.fleet import FleetPage, ReplicaInfo, SeriesArrays
from infersight.telemetry.exporter.names import exported_name
from infersight.telemetry.prometheus.catalog import (
    Signal,
    dcgm_signals,
    dcgm_spec,
    detected_engines,
    engine_signals,
    exporter_signals,
    metric_selector,
    parse_selector,
)
from infersight.telemetry.prometheus.http import MatrixSeries, PrometheusClient
from infersight.telemetry.prometheus.replicas import Inventory, build_inventory
from infersight.telemetry.prometheus.times import parse_duration, promql_duration

__all__ = ["DEFAULT_PAGE_POINTS", "Fleet", "discover_fleet", "window_counter"]

#: Points per series per page: 2 h at 15 s (Prometheus refuses more than 11,000).
DEFAULT_PAGE_POINTS = 480


def window_counter(t: np.ndarray, rate: np.ndarray, span: float) -> tuple[np.ndarray, np.ndarray]:
    """A cumulative counter from one mean rate per window (``rate(x[window])`` at each
    window's last step ``t``): two points per window, ``span`` apart, whose increase is
    the rate times ``span``; a missing rate counts as 0."""
    r = np.where(np.isfinite(rate), rate, 0.0) * span
    ends = np.cumsum(r)
    starts = np.concatenate([[0.0], ends[:-1]])
    tt = np.column_stack([t - span, t]).ravel()
    vv = np.column_stack([starts, ends]).ravel()
    return tt, vv


@dataclass(slots=True)
class Fleet:
    """What the store holds in the range, and how to read it."""

    client: PrometheusClient
    start: float
    end: float
    step: float
    selector: str
    inventory: Inventory
    signals: list[Signal]
    #: The server's global scrape interval, when it shows its configuration.
    scrape_interval: float | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def replicas(self) -> dict[str, ReplicaInfo]:
        return self.inventory.replicas

    def page_span(self, window: float, page_points: int = DEFAULT_PAGE_POINTS) -> float:
        """Seconds per page: a whole number of windows, at most ``page_points`` steps."""
        per_page = max(1, math.floor(page_points * self.step / window))
        return per_page * window

    def page_count(self, window: float, page_points: int = DEFAULT_PAGE_POINTS) -> int:
        return max(
            1, math.ceil((self.end - self.start) / self.page_span(window, page_points) - 1e-9)
        )

    async def pages(
        self, window: float, page_points: int = DEFAULT_PAGE_POINTS
    ) -> AsyncIterator[FleetPage]:
        """Pages over ``[start, end)``, each a whole number of windows; the next page is
        fetched while the caller works on the current one."""
        span = self.page_span(window, page_points)
        bounds = []
        t = self.start
        while t < self.end - 1e-9:
            bounds.append((t, min(self.end, t + span)))
            t += span
        pending = asyncio.ensure_future(self._page(window, *bounds[0])) if bounds else None
        for i in range(len(bounds)):
            assert pending is not None
            page = await pending
            nxt = bounds[i + 1] if i + 1 < len(bounds) else None
            pending = asyncio.ensure_future(self._page(window, *nxt)) if nxt else None
            try:
                yield page
            except BaseException:
                if pending is not None:
                    pending.cancel()
                raise

    async def _page(self, window: float, t0: float, t1: float) -> FleetPage:
        """Every signal over ``[t0, t1)``: per step, or once per window at the window's
        last step (its mean or quantile over the window, computed by Prometheus)."""
        win = promql_duration(window)
        last = max(t0, t1 - self.step)  # t1 is the next page's first point

        def query(s: Signal) -> Awaitable[list[MatrixSeries]]:
            q = s.promql.replace("{win}", win)
            if s.per_window:
                return self.client.query_range(q, t0 + window - self.step, last, window)
            return self.client.query_range(q, t0, last, self.step)

        results = await asyncio.gather(*(query(s) for s in self.signals))
        page = FleetPage(start=t0, end=t1)
        for sig, result in zip(self.signals, results, strict=True):
            self._add(page, sig, result, window)
        return page

    def _add(self, page: FleetPage, sig: Signal, result: list[MatrixSeries], window: float) -> None:
        for ms in result:
            found = self.inventory.replica_of(sig, ms.labels)
            if found is None:
                continue
            rid, labels = found
            t, v = ms.t, ms.v
            if sig.counter:  # counters are read once per window (their mean rate)
                t, v = window_counter(t, v, window - self.step)
            page.series.setdefault(rid, []).append(SeriesArrays(sig.name, labels, t, v))


async def _scrape_interval(client: PrometheusClient) -> float | None:
    """The server's global scrape interval (status/config), when it shows its config."""
    try:
        data = await client.call_get("status/config")
        doc = yaml.safe_load(str((data or {}).get("yaml", ""))) or {}
        value = (doc.get("global") or {}).get("scrape_interval")
        return parse_duration(str(value)) if value else None
    except (InfersightError, yaml.YAMLError, AttributeError):
        return None  # Thanos, Mimir or a proxy may not expose it


def _anchor(spec_metrics: dict[str, tuple[str, ...]], names: set[str]) -> str | None:
    for wanted in ("engine.requests_running", "engine.requests_waiting"):
        for metric, targets in spec_metrics.items():
            if wanted in targets and metric in names:
                return metric
    return None


async def _engine_sets(
    client: PrometheusClient, names: set[str], m: str, t0: float, t1: float
) -> dict[str, list[dict[str, str]]]:
    out: dict[str, list[dict[str, str]]] = {}
    for spec in detected_engines(names):
        anchor = _anchor({k: tuple(r.name for r in v) for k, v in spec.metrics.items()}, names)
        if anchor is not None:
            out[spec.key] = await client.series([metric_selector(anchor, m)], t0, t1)
    return out


async def discover_fleet(
    client: PrometheusClient,
    *,
    start: float,
    end: float,
    step: float,
    selector: str = "",
    gpu_selector: str = "",
    physics: bool = False,
) -> Fleet:
    """The engines, exporters and replicas with series in ``[start, end]``. ``physics``:
    also read token throughput and latency medians (for the roofline floors)."""
    m, gm = parse_selector(selector), parse_selector(gpu_selector)
    names = set(await client.label_values("__name__", [f"{{{m}}}"] if m else [], start, end))
    gpu_names = (
        names
        if gm == m
        else set(await client.label_values("__name__", [f"{{{gm}}}"] if gm else [], start, end))
    )
    engine_sets = await _engine_sets(client, names, m, start, end)
    exp_anchor = exported_name("engine.requests_running")
    exporter_sets = (
        await client.series([metric_selector(exp_anchor, m)], start, end)
        if exp_anchor in names
        else []
    )
    spec = dcgm_spec()
    dcgm_anchor = next((k for k in spec.metrics if k in gpu_names), None)
    gpu_sets = (
        await client.series([metric_selector(dcgm_anchor, gm)], start, end) if dcgm_anchor else []
    )
    exp_gpu = exported_name("gpu.utilization")
    exp_gpu_sets = (
        await client.series([metric_selector(exp_gpu, m)], start, end) if exp_gpu in names else []
    )
    inv = build_inventory(engine_sets, exporter_sets, gpu_sets, exp_gpu_sets, spec)
    if not inv.replicas:
        known = ", ".join(p for s in engine_specs().values() for p in s.detect)
        where = f" matching {selector}" if selector else ""
        raise ConfigError(
            f"Prometheus at {client.url} has no engine series{where} between the "
            f"range's start and end ({len(names)} metric names, none from a known "
            f"engine or exporter: {known}, {exp_anchor})"
        )
    signals = [
        s for key in engine_sets for s in engine_signals(engine_specs()[key], names, m, physics)
    ]
    signals += exporter_signals(names, m, physics) + dcgm_signals(spec, gpu_names, gm)
    inv.direct = {(s.source, s.name, s.stat) for s in signals if s.family == "engine"}
    return Fleet(
        client=client,
        start=start,
        end=end,
        step=step,
        selector=selector,
        inventory=inv,
        signals=signals,
        scrape_interval=await _scrape_interval(client),
        notes=[*inv.notes, *_coverage_notes(inv, gpu_names, gpu_sets)],
    )


def _coverage_notes(
    inv: Inventory, gpu_names: set[str], gpu_sets: list[dict[str, str]]
) -> list[str]:
    notes = []
    if gpu_sets and "DCGM_FI_PROF_SM_ACTIVE" not in gpu_names:
        notes.append(
            "dcgm-exporter exports no DCGM_FI_PROF_SM_ACTIVE (its default "
            "dcp-metrics-included.csv has it commented out): SM activity is unknown, so "
            "a GPU at 100% utilisation doing little work cannot be told apart"
        )
    if not any(r.gpus for r in inv.replicas.values()):
        notes.append(
            "no GPU series joined to a replica (dcgm-exporter or infersight exporter): "
            "verdicts use the engines' own metrics only"
        )
    return notes
