"""Shared types: errors, request records, RunResult, verdicts, settings; the stored
documents and the plumbing every package uses (the maths over records is `infersight.stats`)."""

from infersight.core.errors import InfersightError
from infersight.core.records import RequestRecord, RunResult, Sample
from infersight.core.verdicts import Evidence, Verdict, VerdictWindow

__all__ = [
    "Evidence",
    "InfersightError",
    "RequestRecord",
    "RunResult",
    "Sample",
    "Verdict",
    "VerdictWindow",
]
