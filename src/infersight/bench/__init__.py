"""infersight.bench: a load generator whose numbers can be trusted.

>>> from infersight.bench import BenchConfig, run
>>> result = run(BenchConfig(url="http://127.0.0.1:8000", concurrency=[1, 4], requests=32))
>>> result.aggregates["c=4"]["ttft"]["p99"]

Metrics follow ``docs/design.md`` section 2: latency counts from the intended send
time, ITL is pooled (and per request beside it), every percentile is exact and carries
its sample count, and a run the load generator limited says so.
"""

from infersight.bench.config import BenchConfig, parse_levels, parse_slo
from infersight.bench.level import LevelSpec
from infersight.bench.runner import run, run_async
from infersight.bench.schedule import open_loop_schedule
from infersight.bench.workload import Distribution

__all__ = [
    "BenchConfig",
    "Distribution",
    "LevelSpec",
    "open_loop_schedule",
    "parse_levels",
    "parse_slo",
    "run",
    "run_async",
]
