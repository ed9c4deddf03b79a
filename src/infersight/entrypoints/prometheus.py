"""``diagnose --prometheus`` and ``report --prometheus``: read every replica's series
from a Prometheus over a range (telemetry, page by page) and diagnose them as they
arrive (the pure fleet diagnoser), with a progress bar on stderr.
"""

from __future__ import annotations

import asyncio
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

from infersight.core.errors import ConfigError
from infersight.core.fleet import FleetReport
from infersight.diagnose import FleetDiagnoser
from infersight.report.files import write_text
from infersight.report.fleet.console import render_fleet
from infersight.report.fleet.html import render_fleet_html
from infersight.telemetry.prometheus.auth import PrometheusAuth, load_auth
from infersight.telemetry.prometheus.fleet import DEFAULT_PAGE_POINTS, discover_fleet
from infersight.telemetry.prometheus.http import PrometheusClient
from infersight.telemetry.prometheus.times import parse_duration, resolve_range

if TYPE_CHECKING:
    from infersight.diagnose.physics import Device

__all__ = ["FleetQuery", "diagnose_prometheus", "print_fleet", "write_fleet_html"]


@dataclass(slots=True)
class FleetQuery:
    """What to read: the server, the range and which series."""

    url: str
    since: str | None = None
    start: str | None = None
    end: str | None = None
    step: str = "15s"
    selector: str = ""
    gpu_selector: str = ""
    window: float | None = None
    http_config: Path | str | None = None
    page_points: int | None = None


def default_window(span: float, step: float, scrape: float | None = None) -> float:
    """A sixtieth of the range (1 min for 1 h, 15 min for a day), at most 15 minutes and
    at least 4 steps and 4 scrape intervals (so rates over a window have points), in
    whole steps."""
    w = max(4 * step, 4 * (scrape or 0.0), min(900.0, span / 60))
    return max(step, math.ceil(w / step - 1e-9) * step)


def diagnose_prometheus(
    q: FleetQuery,
    *,
    engine_slots: int | None = None,
    model: object = None,
    gpu: str | Device | None = None,
    progress: bool = True,
) -> FleetReport:
    """Diagnose every replica the Prometheus at ``q.url`` holds in the range."""
    step = parse_duration(q.step, "--step")
    start, end = resolve_range(since=q.since, start=q.start, end=q.end, step=step)
    if q.window is not None and q.window < step:
        raise ConfigError(f"--window {q.window:g} s is shorter than --step {step:g} s")
    auth = load_auth(q.http_config)
    return asyncio.run(_run(q, auth, start, end, step, engine_slots, model, gpu, progress))


async def _run(
    q: FleetQuery,
    auth: object,
    start: float,
    end: float,
    step: float,
    engine_slots: int | None,
    model: object,
    gpu: object,
    progress: bool,
) -> FleetReport:
    assert isinstance(auth, PrometheusAuth)
    t_begin = time.perf_counter()
    points = q.page_points or DEFAULT_PAGE_POINTS
    async with PrometheusClient(q.url, auth) as prom:
        fleet = await discover_fleet(
            prom,
            start=start,
            end=end,
            step=step,
            selector=q.selector,
            gpu_selector=q.gpu_selector,
            physics=model is not None and gpu is not None,
        )
        window = q.window or default_window(end - start, step, fleet.scrape_interval)
        # whole windows: the range starts earlier by less than one window if need be
        start = fleet.start = end - math.ceil((end - start) / window - 1e-9) * window
        diag = FleetDiagnoser(
            fleet.replicas,
            start=start,
            end=end,
            step=step,
            window=window,
            engine_slots=engine_slots,
            model=model,
            gpu=gpu,  # type: ignore[arg-type]
        )
        bar = Progress(
            TextColumn("[bold]reading Prometheus[/bold]"),
            BarColumn(),
            TextColumn("{task.completed}/{task.total} pages · {task.fields[pts]:,} points"),
            TimeRemainingColumn(),
            console=Console(stderr=True),
            transient=True,
            disable=not progress or not sys.stderr.isatty(),
        )
        with bar:
            task = bar.add_task("pages", total=fleet.page_count(window, points), pts=0)
            async for page in fleet.pages(window, points):
                # diagnose in a thread: the next page's queries run meanwhile
                await asyncio.to_thread(diag.add_page, page)
                bar.update(task, advance=1, pts=prom.points)
        report = diag.finish()
    report.source, report.selector = prom.url, q.selector
    report.notes = [*fleet.notes, *report.notes, *(f"Prometheus: {w}" for w in prom.warnings)]
    report.stats = {
        "pages": diag.pages,
        "queries": prom.queries,
        "points": prom.points,
        "signals": len(fleet.signals),
        "scrape_interval_s": fleet.scrape_interval,
        "seconds": round(time.perf_counter() - t_begin, 2),
    }
    return report


def print_fleet(report: FleetReport, *, as_json: bool = False) -> None:
    """The fleet summary and each replica's verdicts on stdout (or the JSON document)."""
    if as_json:
        sys.stdout.buffer.write(report.model_dump_json(indent=2).encode() + b"\n")
        return

    render_fleet(report, Console())


def write_fleet_html(report: FleetReport, out: Path | str) -> Path:
    """The self-contained HTML page of the fleet diagnosis."""
    return write_text(out, render_fleet_html(report))
