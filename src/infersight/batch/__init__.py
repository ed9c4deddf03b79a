"""Offline batch runs: a file of prompts through any OpenAI-compatible endpoint.

``infersight batch INPUT --out OUTPUT`` / :func:`run_batch` validates the whole input
first, finds the concurrency the server takes (or uses a fixed one), streams results to
an fsync'ed OpenAI Batch output file that a rerun resumes, and stops within a budget.
"""

from infersight.batch.api import run_batch, run_batch_async
from infersight.batch.input import BadInput, BadLine, BatchRow, InputScan, parse_line, scan_input
from infersight.batch.output import OutputWriter, compact_output, load_output, read_output
from infersight.batch.summary import BatchSummary, render_summary
from infersight.control.adaptive import AdaptiveConcurrency
from infersight.control.controller import ConcurrencyController, Decision, FixedConcurrency
from infersight.flags.batch import BatchConfig

__all__ = [
    "AdaptiveConcurrency",
    "BadInput",
    "BadLine",
    "BatchConfig",
    "BatchRow",
    "BatchSummary",
    "ConcurrencyController",
    "Decision",
    "FixedConcurrency",
    "InputScan",
    "OutputWriter",
    "compact_output",
    "load_output",
    "parse_line",
    "read_output",
    "render_summary",
    "run_batch",
    "run_batch_async",
    "scan_input",
]
