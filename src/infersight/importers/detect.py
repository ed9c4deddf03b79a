"""Which tool wrote a file, from its content (never its name), and the one entry point
that reads it: :func:`import_file`.

A file that parses is recognised by its keys; a truncated or garbled one by the names
its format always writes near the start, so its error can still say which format was
guessed. Every failure is one :class:`~infersight.core.errors.ConfigError` line naming
the file, the format and what is wrong.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import orjson

import infersight.importers.aiperf as aiperf
import infersight.importers.guidellm as guidellm
import infersight.importers.inference_perf as inference_perf
import infersight.importers.llmd as llmd
import infersight.importers.vllm as vllm
from infersight.core.errors import ConfigError, read_user_file
from infersight.core.records import RunResult
from infersight.importers.common import Malformed

__all__ = ["FORMATS", "detect", "import_bytes", "import_file"]

#: Format id -> (what the error line calls it, its module).
FORMATS: dict[str, tuple[str, ModuleType]] = {
    guidellm.FORMAT: (guidellm.LABEL, guidellm),
    aiperf.FORMAT_RECORDS: (aiperf.LABEL_RECORDS, aiperf),
    aiperf.FORMAT_SUMMARY: (aiperf.LABEL_SUMMARY, aiperf),
    vllm.FORMAT: (vllm.LABEL, vllm),
    inference_perf.FORMAT_REQUESTS: (inference_perf.LABEL_REQUESTS, inference_perf),
    inference_perf.FORMAT_SUMMARY: (inference_perf.LABEL_SUMMARY, inference_perf),
    llmd.FORMAT: (llmd.LABEL, llmd),
}

#: Parsed document -> format id, tried in order.
_BY_KEYS: tuple[tuple[str, Callable[[Any], bool]], ...] = (
    (guidellm.FORMAT, guidellm.looks_like),
    (aiperf.FORMAT_SUMMARY, aiperf.looks_like_summary),
    (aiperf.FORMAT_RECORDS, aiperf.looks_like_record),
    (inference_perf.FORMAT_REQUESTS, inference_perf.looks_like_requests),
    (inference_perf.FORMAT_SUMMARY, inference_perf.looks_like_summary),
    (vllm.FORMAT, vllm.looks_like),
    (llmd.FORMAT, llmd.looks_like),
)

#: Byte patterns of the first KiB of each format, for files that do not parse.
_BY_BYTES: tuple[tuple[str, tuple[bytes, ...]], ...] = (
    (guidellm.FORMAT, (b'"benchmarks"',)),
    (aiperf.FORMAT_SUMMARY, (b'"aiperf_version"',)),
    (aiperf.FORMAT_RECORDS, (b'"benchmark_phase"',)),
    (aiperf.FORMAT_RECORDS, (b'"x_request_id"',)),
    (inference_perf.FORMAT_REQUESTS, (b'"start_time"', b'"end_time"', b'"request"')),
    (inference_perf.FORMAT_SUMMARY, (b'"load_summary"',)),
    (inference_perf.FORMAT_SUMMARY, (b'"successes"', b'"failures"')),
    (vllm.FORMAT, (b'"request_throughput"',)),
    (vllm.FORMAT, (b'"endpoint_type"',)),
    (llmd.FORMAT, (b'"version"', b'"run"', b'"results"')),
    (llmd.FORMAT, (b'"version"', b'"scenario"', b'"metrics"')),
    (llmd.FORMAT, (b"version:", b"run:")),
    (llmd.FORMAT, (b"version:", b"scenario:")),
)


def _first_document(data: bytes) -> Any:
    """The whole file as JSON, else its first line (JSON Lines), else None."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        pass
    line = data.lstrip().split(b"\n", 1)[0]
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        pass
    try:
        return json.loads(line)  # vLLM writes NaN and Infinity
    except (ValueError, UnicodeDecodeError):
        return None


def detect(data: bytes) -> str | None:
    """The format id of another tool's result, or None (an infersight RunResult, or
    nothing this package knows)."""
    doc = _first_document(data)
    if (
        isinstance(doc, dict)
        and isinstance(doc.get("schema_version"), int)
        and ("records" in doc or "aggregates" in doc)
    ):
        return None  # ours
    if doc is None and data.lstrip()[:1] not in (b"{", b"["):
        try:  # a benchmark report in YAML (the package writes its keys sorted)
            doc = llmd.parse(data)
        except Malformed:
            doc = None
    if doc is not None:
        for fmt, test in _BY_KEYS:
            if test(doc):
                return fmt
        return None
    head = data[:4096]
    for fmt, needles in _BY_BYTES:
        if all(n in head for n in needles):
            return fmt
    return None


def import_bytes(data: bytes, source: str, fmt: str | None = None) -> RunResult:
    """Read another tool's result; ``fmt`` skips detection. One ConfigError line for
    a file that is no known format, or that is broken."""
    fmt = fmt or detect(data)
    if fmt is None or fmt not in FORMATS:
        raise ConfigError(
            f"{source}: not a result this version reads (an infersight RunResult, GuideLLM "
            "benchmarks JSON, AIPerf profile export, vllm bench serve --save-result JSON, "
            "an inference-perf report or an llm-d benchmark report)"
        )
    label, module = FORMATS[fmt]
    try:
        result: RunResult = module.read(data, source, fmt)
        return result
    except Malformed as e:
        raise ConfigError(f"{source}: read as {label} (from its content): {e}") from None
    except ConfigError as e:
        raise ConfigError(f"{source}: read as {label} (from its content): {e}") from None
    except (
        KeyError,
        TypeError,
        ValueError,
        IndexError,
        AttributeError,
        OverflowError,
        RecursionError,
        UnicodeDecodeError,
    ) as e:
        # A shape the reader did not expect: still one line, never a traceback.
        raise ConfigError(
            f"{source}: read as {label} (from its content): unexpected structure "
            f"({type(e).__name__}: {e})"
        ) from None


def import_file(path: str | Path) -> RunResult:
    """Read another tool's result file (the format from its content)."""
    p = Path(path)
    return import_bytes(read_user_file(p), str(p))
