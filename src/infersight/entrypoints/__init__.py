"""infersight.entrypoints: each command as an importable function.

The CLI parses flags and hands off here; this layer assembles the pieces the feature
packages leave apart. It is the one place the embedded engine is started
(:func:`endpoint`): ``bench``, ``batch`` and ``gateway`` receive a URL and plain data
about the server, never the engine. ``bench`` is chained with ``diagnose`` and the
output writers here too.

    from infersight.bench import BenchConfig
    from infersight.entrypoints import bench_and_diagnose
    result = bench_and_diagnose(BenchConfig(concurrency=[1, 4], requests=32))

Names are imported on first use, so ``infersight --help`` stays fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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
    from infersight.entrypoints.results import load_result, load_results
    from infersight.entrypoints.serve import ServeSettings, serve_engine

_WHERE = {
    "dry_run_batch": "batch",
    "run_batch_command": "batch",
    "bench_and_diagnose": "bench",
    "run_bench": "bench",
    "load_inputs": "diagnose",
    "print_diagnoses": "diagnose",
    "watch_url": "diagnose",
    "EngineOptions": "engine",
    "describe": "engine",
    "endpoint": "engine",
    "engine_opener": "engine",
    "new_engine": "engine",
    "running_engine": "engine",
    "engine_upstream": "gateway",
    "fronting_engine": "gateway",
    "gateway_config": "gateway",
    "run_gateway": "gateway",
    "ServeSettings": "serve",
    "serve_engine": "serve",
    "load_result": "results",
    "load_results": "results",
    "FleetQuery": "prometheus",
    "diagnose_prometheus": "prometheus",
    "print_fleet": "prometheus",
    "write_fleet_html": "prometheus",
}

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


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'infersight.entrypoints' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"infersight.entrypoints.{_WHERE[name]}"), name)
    globals()[name] = value
    return value
