"""What every importer shares: the typed failure, reading JSON, and building the
RunResult from the levels a foreign file holds (docs/design.md section 10).

An importer turns its format into :class:`ImportedLevel` objects, each holding request
records (docs/design.md section 2) or, for a file of aggregates alone, an aggregate
filled from the tool's own statistics. :func:`build_run` aggregates the records with
the same code as ``bench`` and stores what was imported under ``config["imported"]``:
the tool, the file, what the file lacks, and the tool's own definitions where they
differ from ours.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from infersight.core.numbers import as_float
from infersight.core.records import ClockAnchor, RequestRecord, RunResult
from infersight.stats.aggregate import aggregate

__all__ = [
    "MAX_SPAN_S",
    "MAX_TOKENS",
    "ImportSpec",
    "ImportedLevel",
    "Malformed",
    "as_float",
    "as_int",
    "build_run",
    "check_records",
    "level_name",
    "load_json",
    "need",
    "obj",
]


class Malformed(Exception):
    """The file is of a known format but cannot be read as one; the message says what
    is wrong (the caller adds the file and the format)."""


def load_json(data: bytes) -> Any:
    """Parse JSON; Python's own ``NaN``/``Infinity`` (vLLM writes them) are accepted."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        pass
    try:
        return json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        at = getattr(e, "pos", None)
        msg = str(getattr(e, "msg", e))
        unclosed = msg.startswith("Unterminated string")  # its position is the string's start
        if unclosed:
            msg = "a string is not closed"
        where = f" at byte {at} of {len(data)}" if at is not None else ""
        cut = at is not None and (unclosed or at >= len(data.rstrip()) - 1)
        raise Malformed(f"not valid JSON{where}{' (truncated?)' if cut else ''}: {msg}") from None


def need(doc: Any, key: str, kind: type | tuple[type, ...], where: str) -> Any:
    """``doc[key]``, which must be of ``kind``; otherwise :class:`Malformed` naming it."""
    if not isinstance(doc, dict):
        raise Malformed(f"{where} is not an object")
    if key not in doc:
        raise Malformed(f"{where} has no {key!r}")
    value = doc[key]
    if not isinstance(value, kind) or (isinstance(value, bool) and bool not in _kinds(kind)):
        raise Malformed(f"{where}.{key} is {type(value).__name__}, not {_kind_name(kind)}")
    return value


def _kinds(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def _kind_name(kind: type | tuple[type, ...]) -> str:
    return " or ".join(k.__name__ for k in _kinds(kind))


def obj(doc: Any, key: str) -> dict[str, Any]:
    """``doc[key]`` when both are objects, else an empty one (an optional part)."""
    value = doc.get(key) if isinstance(doc, dict) else None
    return value if isinstance(value, dict) else {}


def as_int(value: Any) -> int | None:
    """A whole, non-negative count as int; None for anything else."""
    f = as_float(value)
    if f is None or f < 0 or f != int(f):
        return None
    return int(f)


def level_name(concurrency: int | None, rate: float | None) -> str:
    """The level's name as ``bench`` gives it: ``c=4``, ``r=2.5`` or ``throughput``."""
    if concurrency is not None:
        return f"c={concurrency}"
    if rate is not None:
        return f"r={rate:.4g}"
    return "throughput"


#: The longest span of request times a result file may cover (30 days): beyond it a
#: timestamp is in another unit or clock than its format's, and no window fits.
MAX_SPAN_S = 30 * 86400.0
#: More tokens than this in one request is not a measurement.
MAX_TOKENS = 10_000_000


def check_records(records: list[RequestRecord]) -> None:
    """Refuse (Malformed) records no measurement makes: times spanning more than
    ``MAX_SPAN_S`` (every chunk's time counts, not only the first and last), or more
    tokens than ``MAX_TOKENS``. A reader that computes from its records before
    :func:`build_run` (a tool's own per-request metric) calls this first."""
    times = [t for r in records for t in (r.scheduled, r.sent, r.end) if t is not None]
    times += [t for r in records for t in r.chunk_times]
    if times and max(times) - min(times) > MAX_SPAN_S:
        raise Malformed(
            f"its request times span {(max(times) - min(times)) / 86400:.3g} days "
            "(more than 30): a timestamp is in another unit or clock"
        )
    for r in records:
        for what, n in (("output", r.completion_tokens), ("prompt", r.prompt_tokens)):
            if n is not None and n > MAX_TOKENS:
                raise Malformed(
                    f"request {r.request_id} has {n} {what} tokens: more than any request holds"
                )


@dataclass
class ImportedLevel:
    """One load level of a foreign file, with its target (a concurrency, a rate, or
    neither: everything sent at once)."""

    name: str
    concurrency: int | None = None
    rate: float | None = None
    records: list[RequestRecord] = field(default_factory=list)
    #: For a file of aggregates alone: the level's aggregate, in our shape.
    aggregate: dict[str, Any] | None = None
    #: The tool's own statistics where its definition differs from ours:
    #: name -> {"definition", "ours", "summary"} (seconds).
    tool_metrics: dict[str, Any] = field(default_factory=dict)
    #: True when every request was released at once (GuideLLM's throughput profile).
    all_at_once: bool = False


@dataclass
class ImportSpec:
    """What the importer knows of the file beside its levels."""

    format: str
    tool: str
    source: str
    tool_version: str | None = None
    url: str | None = None
    model: str | None = None
    #: The tool's definitions that differ from docs/design.md section 2, by metric.
    definitions: dict[str, str] = field(default_factory=dict)
    #: Evidence the file does not hold, in words.
    missing: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: How to keep per-request timings next time, for a file of aggregates alone.
    rerun_hint: str | None = None


def build_run(spec: ImportSpec, levels: list[ImportedLevel]) -> RunResult:
    """The RunResult of the imported levels (records aggregated as ``bench`` does)."""
    if not levels:
        raise Malformed("it holds no load level (no benchmark, stage or request)")
    seen: set[str] = set()
    for lv in levels:  # two benchmarks at the same target stay apart
        base, n = lv.name, 2
        while lv.name in seen:
            lv.name, n = f"{base} #{n}", n + 1
        seen.add(lv.name)
    check_records([r for lv in levels for r in lv.records])
    records: list[RequestRecord] = []
    aggregates: dict[str, Any] = {}
    for lv in levels:
        for r in lv.records:
            r.labels["level"] = lv.name
        records.extend(lv.records)
        if lv.records:
            agg = aggregate(
                lv.records,
                target_concurrency=lv.concurrency,
                target_rate=lv.rate,
                check_lag=not lv.all_at_once,
            )
        else:
            agg = dict(
                lv.aggregate
                or aggregate([], target_concurrency=lv.concurrency, target_rate=lv.rate)
            )
        if lv.tool_metrics:
            agg["tool_metrics"] = lv.tool_metrics
        aggregates[lv.name] = agg
    has_requests = bool(records)
    first = min((r.scheduled for r in records), default=0.0)
    imported = {
        "format": spec.format,
        "tool": spec.tool,
        "tool_version": spec.tool_version,
        "source": spec.source,
        "has_requests": has_requests,
        "requests": len(records),
        "definitions": spec.definitions,
        "missing": spec.missing,
        "rerun_hint": spec.rerun_hint,
    }
    config: dict[str, Any] = {
        "url": spec.url,
        "model": spec.model,
        "stream": True,
        "levels": [
            {"name": lv.name, "concurrency": lv.concurrency, "rate": lv.rate} for lv in levels
        ],
        "imported": imported,
    }
    kept = "per-request timings" if has_requests else "aggregates only"
    version = f" {spec.tool_version}" if spec.tool_version else ""
    notes = [f"imported from {spec.tool}{version} ({kept}): {Path(spec.source).name}", *spec.notes]
    result = RunResult(
        kind="import",
        run_id=f"{spec.format}:{Path(spec.source).stem}",
        # The foreign clocks are wall clocks or a monotonic clock of their own; either
        # way one axis: anchor it at the first request.
        clock=ClockAnchor(monotonic=first, wall=first if first > 1e9 else 0.0),
        config=config,
        versions={spec.tool: spec.tool_version} if spec.tool_version else {},
        aggregates=aggregates,
        notes=notes,
    )
    result.records = records
    return result
