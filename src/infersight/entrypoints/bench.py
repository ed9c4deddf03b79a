"""``infersight bench`` as a function: a server, the run, its diagnosis, the outputs.

The chain is bench -> diagnose -> output: ``bench`` measures and returns a RunResult,
``diagnose`` adds the verdicts (and the physics it measured) to it, and the output
writers print and save it. Only this layer starts the embedded engine.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from infersight.bench import BenchConfig
from infersight.bench.progress import LiveDisplay
from infersight.bench.runner import run_async
from infersight.bench.runtime import run_coroutine
from infersight.core.endpoint import Endpoint
from infersight.core.records import RunResult
from infersight.diagnose import embed_diagnosis
from infersight.entrypoints.engine import EngineOptions, endpoint
from infersight.report import render_console, render_percentiles, table_console, write_outputs
from infersight.report.llmd.writer import write_llmd

__all__ = ["bench_and_diagnose", "bench_on", "run_bench"]


def run_bench(
    cfg: BenchConfig, *, console: Console | None = None, llmd: str | None = None
) -> RunResult:
    """``infersight bench``: :func:`bench_and_diagnose`, then print the result and
    write ``cfg.out`` (with ``llmd``, a version, also llm-d-benchmark's reports of that
    version in ``out/llm-d``)."""
    con = console or table_console()
    result = bench_and_diagnose(cfg, console=con)
    output = cfg.output
    render_console(result, con)
    if output.percentile_metrics:
        render_percentiles(result, output.percentile_metrics, output.metric_percentiles, con)
    if output.out:
        paths = write_outputs(result, output.out, json_name=output.result_filename)
        con.print(f"wrote {paths['json']} and {paths['csv']}")
        if llmd:
            written = write_llmd(result, Path(output.out) / "llm-d", version=llmd)
            con.print(
                f"wrote {len(written)} llm-d benchmark reports in {Path(output.out) / 'llm-d'}"
            )
    return result


def bench_and_diagnose(cfg: BenchConfig, *, console: Console | None = None) -> RunResult:
    """Benchmark ``cfg.url`` (or the embedded engine, started for the run and stopped
    after it) and, when ``cfg.diagnose``, store the diagnosis in the result."""
    target = cfg.target
    opts = EngineOptions(parallel=target.engine_parallel, ctx=target.engine_ctx)

    def say_starting() -> None:
        if console is not None:
            console.print("[dim]starting the embedded engine...[/]")

    with endpoint(target.url, opts, command="bench", on_start=say_starting) as ep:
        result = bench_on(cfg, ep)
    if cfg.output.diagnose:
        # store_physics: the peaks and floors measured here travel with the file
        embed_diagnosis(result, store_physics=True)
    return result


def bench_on(cfg: BenchConfig, ep: Endpoint) -> RunResult:
    """Benchmark a server that is running already (no diagnosis)."""
    return run_coroutine(run_async(cfg, endpoint=ep, display=LiveDisplay(cfg.output.progress)))
