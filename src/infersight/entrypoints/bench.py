"""``infersight bench`` as a function: a server, the run, its diagnosis, the outputs.

The chain is bench -> diagnose -> output: ``bench`` measures and returns a RunResult,
``diagnose`` adds the verdicts (and the physics it measured) to it, and the output
writers print and save it. Only this layer starts the embedded engine.
"""

from __future__ import annotations

import logging

from rich.console import Console

from infersight.bench import BenchConfig
from infersight.core.records import RunResult
from infersight.entrypoints.engine import EngineOptions, endpoint

__all__ = ["bench_and_diagnose", "diagnose_into", "run_bench"]

log = logging.getLogger(__name__)


def _console() -> Console:
    console = Console()
    if not console.is_terminal:
        console = Console(width=160)  # a file or pipe: keep the table's columns whole
    return console


def run_bench(cfg: BenchConfig, *, console: Console | None = None) -> RunResult:
    """``infersight bench``: :func:`bench_and_diagnose`, then print the result and
    write ``cfg.out``."""
    from infersight.bench.output import render, write_outputs

    con = console or _console()
    result = bench_and_diagnose(cfg, console=con)
    render(result, con)
    if cfg.out:
        paths = write_outputs(result, cfg.out)
        con.print(f"wrote {paths['json']} and {paths['csv']}")
    return result


def bench_and_diagnose(cfg: BenchConfig, *, console: Console | None = None) -> RunResult:
    """Benchmark ``cfg.url`` (or the embedded engine, started for the run and stopped
    after it) and, when ``cfg.diagnose``, store the diagnosis in the result."""
    from infersight.bench.progress import LiveDisplay
    from infersight.bench.runner import run_async
    from infersight.bench.runtime import run_coroutine

    opts = EngineOptions(parallel=cfg.engine_parallel, ctx=cfg.engine_ctx)

    def say_starting() -> None:
        if console is not None:
            console.print("[dim]starting the embedded engine...[/]")

    with endpoint(cfg.url, opts, command="bench", on_start=say_starting) as ep:
        result = run_coroutine(run_async(cfg, endpoint=ep, display=LiveDisplay(cfg.progress)))
    if cfg.diagnose:
        diagnose_into(result)
    return result


def diagnose_into(result: RunResult) -> None:
    """Store the verdicts, and the peaks and floors they used, in ``result``."""
    from infersight.diagnose import diagnose

    # A bug in diagnose must not cost the user the measurements: keep them, but say
    # so loudly (a logged traceback and a note in every output), never pass quietly.
    try:
        # store_physics: the peaks and floors measured here travel with the file
        verdicts = diagnose(result, store_physics=True)
        result.diagnosis = [v.model_dump(mode="json") for v in verdicts]
    except Exception as e:
        log.exception("diagnosis failed")
        result.notes.append(f"diagnosis failed (a bug, please report it): {type(e).__name__}: {e}")
