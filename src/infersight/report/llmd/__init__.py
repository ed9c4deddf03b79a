"""infersight.report.llmd: llm-d-benchmark's benchmark report, one per level.

``parts`` takes what both lines of the format need from a RunResult level, ``v02`` and
``v01`` build the format package's own models, ``writer`` picks the line and writes.
"""

from infersight.report.llmd.writer import LLMD_VERSION, LLMD_VERSIONS, llmd_reports, write_llmd

__all__ = ["LLMD_VERSION", "LLMD_VERSIONS", "llmd_reports", "write_llmd"]
