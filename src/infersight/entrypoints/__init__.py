"""infersight.entrypoints: each command as an importable function.

The CLI parses flags and hands off here; this layer assembles the pieces the feature
packages leave apart. It is the one place the embedded engine is started
(:func:`endpoint`): ``bench``, ``batch`` and ``gateway`` receive a URL and plain data
about the server, never the engine. ``bench`` is chained with ``diagnose`` and the
output writers here too.

    from infersight.bench import BenchConfig
    from infersight.entrypoints import bench_and_diagnose
    result = bench_and_diagnose(BenchConfig(concurrency=[1, 4], requests=32))

The CLI imports this package inside its commands, so ``infersight --help`` stays fast.
"""

from __future__ import annotations

from infersight.entrypoints.batch import dry_run_batch, run_batch_command
from infersight.entrypoints.bench import bench_and_diagnose, run_bench
from infersight.entrypoints.diagnose import load_inputs, print_diagnoses, watch_url
from infersight.entrypoints.engine import (
    EngineOptions,
    describe,
    endpoint,
    engine_opener,
    new_engine,
    running_engine,
)
from infersight.entrypoints.gateway import (
    engine_upstream,
    fronting_engine,
    gateway_config,
    run_gateway,
)
from infersight.entrypoints.prometheus import (
    FleetQuery,
    diagnose_prometheus,
    print_fleet,
    write_fleet_html,
)
from infersight.entrypoints.serve import ServeSettings, serve_engine
from infersight.importers import load_result, load_results

__all__ = [
    "EngineOptions",
    "FleetQuery",
    "ServeSettings",
    "bench_and_diagnose",
    "describe",
    "diagnose_prometheus",
    "dry_run_batch",
    "endpoint",
    "engine_opener",
    "engine_upstream",
    "fronting_engine",
    "gateway_config",
    "load_inputs",
    "load_result",
    "load_results",
    "new_engine",
    "print_diagnoses",
    "print_fleet",
    "run_batch_command",
    "run_bench",
    "run_gateway",
    "running_engine",
    "serve_engine",
    "watch_url",
    "write_fleet_html",
]
