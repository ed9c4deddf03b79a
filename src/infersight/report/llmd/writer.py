"""llm-d-benchmark's benchmark report, written from a RunResult with the format's own
package (``llmd-benchmark-report``): version 0.2.1 by default, 0.1 on request.

llm-d-benchmark defines a harness-neutral report that its pipelines and dashboards
read. A report describes one point of a sweep, so a run gives one report per level.
The figures are the level's own aggregates (its measurement window); the 0.2.1 report
also keeps each request's timings and the engine's gauges as time series, so reading
it back (``importers.llmd``) gives the run's verdict. docs/design.md section 2
("Export") maps each field.

    reports = llmd_reports(result)                 # BenchmarkReportV02 models
    write_llmd(result, "out/llm-d", version="0.1")  # benchmark_report_<level>.json
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from infersight.core.errors import ConfigError
from infersight.core.records import RunResult
from infersight.report.files import write_json
from infersight.report.llmd.parts import level_parts

if TYPE_CHECKING:
    from llmd_benchmark_report import BenchmarkReport

__all__ = ["LLMD_VERSION", "LLMD_VERSIONS", "llmd_reports", "write_llmd"]

#: The benchmark report's version written by default.
LLMD_VERSION = "0.2.1"
#: Every version written here.
LLMD_VERSIONS = ("0.2.1", "0.1")


def _by_level(result: RunResult, version: str) -> list[tuple[str, BenchmarkReport]]:
    if version not in LLMD_VERSIONS:
        raise ConfigError(f"llm-d benchmark report {version!r}: use {' or '.join(LLMD_VERSIONS)}")
    # Imported here, not at the top: each line's models (llmd-benchmark-report's pydantic
    # classes) add 0.1-0.25 s over `import infersight.report` (measured, 2-core box), and
    # only `--format llm-d` needs one of them.
    if version == "0.1":
        from infersight.report.llmd.v01 import report_v01 as build
    else:
        from infersight.report.llmd.v02 import report_v02 as build  # type: ignore[assignment]
    return [(part.name, build(result, part)) for part in level_parts(result)]


def llmd_reports(result: RunResult, version: str = LLMD_VERSION) -> list[BenchmarkReport]:
    """One benchmark report per level of ``result`` that answered (in level order),
    as the package's validated models; a level without a single TTFT has no report."""
    return [rep for _, rep in _by_level(result, version)]


def write_llmd(
    result: RunResult, folder: str | Path, *, prefix: str = "", version: str = LLMD_VERSION
) -> list[Path]:
    """Each level's report as ``FOLDER/PREFIXbenchmark_report_<level>.json``."""
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for level, rep in _by_level(result, version):
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in level)
        paths.append(write_json(out / f"{prefix}benchmark_report_{safe}.json", rep.dump()))
    return paths
