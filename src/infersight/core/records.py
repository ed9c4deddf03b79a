"""Shared record types: one timing record per request, telemetry samples, and the
self-contained RunResult document (``docs/design.md`` sections 1 and 2).

All timestamps are ``time.monotonic()`` seconds. On Linux that clock is system-wide,
so records from several worker processes and telemetry samples share one time axis.
``RunResult.clock`` anchors the monotonic axis to wall-clock time.

``RequestRecord`` (defined in :mod:`infersight.core.request_record`, where the errors
that carry one can import it) is a slotted dataclass, not a pydantic model, because the client
fills it inside the SSE loop (the hot path). ``RunResult`` is a pydantic model, so it
validates on load and can publish a JSON Schema.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from infersight.core.atomic import write_atomic
from infersight.core.curve import CapacityCurve, Recommendation
from infersight.core.errors import ConfigError, read_user_file
from infersight.core.request_record import RequestRecord
from infersight.core.server_model import SelfCheck, ServerModel
from infersight.core.settings import config_error
from infersight.core.verdicts import Verdict

__all__ = [
    "SCHEMA_VERSION",
    "ClockAnchor",
    "RequestRecord",
    "RunResult",
    "Sample",
    "load_run_result",
    "save_run_result",
]

#: Version of the RunResult JSON document. Bump on incompatible changes.
SCHEMA_VERSION = 1


@dataclass(slots=True, frozen=True)
class Sample:
    """One telemetry reading: ``(t, name, labels, value)``; value None = not available."""

    t: float
    name: str
    value: float | None
    labels: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"t": self.t, "name": self.name, "value": self.value, "labels": self.labels}


class ClockAnchor(BaseModel):
    """Pairs the monotonic clock with wall time so records can be dated."""

    monotonic: float = Field(default_factory=time.monotonic)
    wall: float = Field(default_factory=time.time)


class RunResult(BaseModel):
    """One self-contained, versioned measurement document (docs/design.md section 1).

    ``diagnose`` and ``report`` work offline on this file alone. ``aggregates`` is a
    cache: it is always recomputable from ``records``.
    """

    model_config = ConfigDict(arbitrary_types_allowed=False, extra="allow")

    schema_version: int = SCHEMA_VERSION
    kind: str = "bench"
    run_id: str = ""
    # The flags come first so that they head the JSON document (docs/design.md section 2:
    # a client-limited run says so at the top of every output).
    #: True when the run was interrupted and holds partial results.
    partial: bool = False
    #: Whether the load generator limited the run (docs/design.md section 2) and why.
    client_limited: bool = False
    client_limited_reasons: list[str] = Field(default_factory=list)
    created: float = Field(default_factory=time.time)
    clock: ClockAnchor = Field(default_factory=ClockAnchor)
    #: The exact configuration the run used (flags, workload, load strategy, engine).
    config: dict[str, Any] = Field(default_factory=dict)
    #: Software versions (python, infersight, engine, libraries).
    versions: dict[str, str] = Field(default_factory=dict)
    #: Host and GPU description.
    environment: dict[str, Any] = Field(default_factory=dict)
    records: list[RequestRecord] = Field(default_factory=list)
    samples: list[Sample] = Field(default_factory=list)
    #: Per load level aggregates, keyed by level name; recomputable from records.
    aggregates: dict[str, Any] = Field(default_factory=dict)
    #: Verdicts from diagnose, when embedded (files with plain verdict dicts load too).
    diagnosis: list[Verdict] = Field(default_factory=list)
    #: The levels as a capacity curve, with the measured knee (docs/design.md section 2).
    capacity_curve: CapacityCurve | None = None
    #: The run's one recommendation, from its curve (docs/design.md section 5).
    recommendation: Recommendation | None = None
    #: The model of the server fitted to the run, and its check on the run itself
    #: (docs/design.md section 9).
    server_model: ServerModel | None = None
    self_check: SelfCheck | None = None
    #: Cost of the run when prices are known: ``usd``, ``usd_per_million_output_tokens``,
    #: ``projected_usd_per_day`` (also per level in ``aggregates[level]["cost"]``).
    cost: dict[str, Any] | None = None
    notes: list[str] = Field(default_factory=list)

    def to_json_bytes(self) -> bytes:
        """Serialise fast with orjson (records are dataclasses)."""
        doc = self.model_dump(mode="python", exclude={"records", "samples"})
        doc["records"] = [r.to_dict() for r in self.records]
        doc["samples"] = [s.to_dict() for s in self.samples]
        return orjson.dumps(doc, option=orjson.OPT_SERIALIZE_NUMPY)

    @classmethod
    def from_json_bytes(cls, data: bytes) -> RunResult:
        """Parse a RunResult document; anything else is one ConfigError line."""
        try:
            doc = orjson.loads(data)
        except orjson.JSONDecodeError as e:
            raise ConfigError(f"not JSON ({e})") from None
        if not isinstance(doc, dict) or "schema_version" not in doc:
            raise ConfigError("not an infersight RunResult (no schema_version)")
        version = doc["schema_version"]
        if not isinstance(version, int):
            raise ConfigError(f"schema_version {version!r} is not a number")
        if version > SCHEMA_VERSION:
            raise ConfigError(
                f"RunResult schema_version {version} is newer than this "
                f"infersight understands ({SCHEMA_VERSION}); upgrade infersight"
            )
        try:
            records = [RequestRecord.from_dict(r) for r in doc.pop("records", [])]
            samples = [Sample(**s) for s in doc.pop("samples", [])]
            result = cls.model_validate(doc)
        except ValidationError as e:
            raise config_error(e) from None
        except (TypeError, ValueError, AttributeError) as e:  # not objects, or bad fields
            raise ConfigError(f"a record or sample is malformed ({e})") from None
        result.records = records
        result.samples = samples
        return result


def save_run_result(result: RunResult, path: str | Path) -> Path:
    """Write atomically (temp file + rename) so an interrupted write never leaves junk."""
    return write_atomic(path, result.to_json_bytes())


def load_run_result(path: str | Path) -> RunResult:
    """Load and validate a RunResult file; raises ConfigError with one clear line."""
    p = Path(path)
    data = read_user_file(p)
    try:
        return RunResult.from_json_bytes(data)
    except ConfigError as e:
        raise ConfigError(f"{p}: not a valid infersight RunResult: {e}") from None
