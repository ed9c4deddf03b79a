"""Shared types: errors, request records, RunResult, settings, statistics."""

from infersight.core.errors import InfersightError
from infersight.core.records import RequestRecord, RunResult, Sample

__all__ = ["InfersightError", "RequestRecord", "RunResult", "Sample"]
