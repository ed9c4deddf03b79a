"""Shared record types: one timing record per request, telemetry samples, and the
self-contained RunResult document (``docs/design.md`` sections 1 and 2).

All timestamps are ``time.monotonic()`` seconds. On Linux that clock is system-wide,
so records from several worker processes and telemetry samples share one time axis.
``RunResult.clock`` anchors the monotonic axis to wall-clock time.

``RequestRecord`` is a slotted dataclass, not a pydantic model, because the client
fills it inside the SSE loop (the hot path). ``RunResult`` is a pydantic model, so it
validates on load and can publish a JSON Schema.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from infersight.core.atomic import write_atomic
from infersight.core.curve import CapacityCurve, Recommendation
from infersight.core.errors import ConfigError, file_error
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


@dataclass(slots=True)
class RequestRecord:
    """Everything measured about one request, taken inside the client.

    ``chunk_times[i]`` is when the i-th SSE event carrying content (text or tool-call
    delta) arrived and ``chunk_tokens[i]`` how many tokens it carried (1 when the
    server does not say). A non-streamed response has one chunk at body arrival.
    """

    request_id: str
    #: Intended send time from the load strategy (monotonic seconds).
    scheduled: float
    sent: float | None = None
    headers: float | None = None
    chunk_times: list[float] = field(default_factory=list)
    chunk_tokens: list[int] = field(default_factory=list)
    end: float | None = None
    #: HTTP status of the final attempt (None if no response arrived).
    status: int | None = None
    #: True only for a complete answer: 2xx and ``[DONE]`` or a finish_reason seen.
    ok: bool = False
    #: Error kind (an ``infersight.core.errors`` class name) when not ok.
    error: str | None = None
    error_message: str | None = None
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    #: Prompt tokens the server took from its prefix cache
    #: (``usage.prompt_tokens_details.cached_tokens``); None when it does not say.
    cached_tokens: int | None = None
    #: True when completion_tokens was counted from chunks because usage was absent.
    tokens_estimated: bool = False
    #: True when the server's usage and the content-chunk count disagree.
    usage_mismatch: bool = False
    #: Seconds spent queued in a gateway, from the ``X-Queue-Delay`` header (ms).
    queue_delay: float | None = None
    attempts: int = 0
    #: Times the request was written again, without an attempt, because the pooled
    #: connection it was given had been closed by the server before any byte of it was
    #: written (docs/design.md section 3: resend is not retry).
    resends: int = 0
    #: Request id from the server's ``X-Request-Id`` header, when given.
    server_request_id: str | None = None
    cancelled: bool = False
    #: Free-form labels: load level, worker index, endpoint, model, upstream.
    labels: dict[str, str] = field(default_factory=dict)

    # -- derived metrics (docs/design.md section 2) -------------------------------------
    @property
    def schedule_lag(self) -> float | None:
        return None if self.sent is None else self.sent - self.scheduled

    @property
    def ttft(self) -> float | None:
        """Time to first token from the intended send time."""
        return self.chunk_times[0] - self.scheduled if self.chunk_times else None

    @property
    def ttft_from_sent(self) -> float | None:
        if not self.chunk_times or self.sent is None:
            return None
        return self.chunk_times[0] - self.sent

    @property
    def e2e(self) -> float | None:
        return None if self.end is None else self.end - self.scheduled

    @property
    def e2e_from_sent(self) -> float | None:
        return None if self.end is None or self.sent is None else self.end - self.sent

    @property
    def output_tokens(self) -> int:
        """Server usage when known, else the sum of chunk token counts."""
        if self.completion_tokens is not None:
            return self.completion_tokens
        return sum(self.chunk_tokens)

    @property
    def tpot(self) -> float | None:
        """(last chunk - first chunk) / (output_tokens - 1), for >= 2 output tokens."""
        n = self.output_tokens
        if n < 2 or len(self.chunk_times) < 2:
            return None
        return (self.chunk_times[-1] - self.chunk_times[0]) / (n - 1)

    @property
    def itl_mean(self) -> float | None:
        """Per-request mean inter-chunk gap (GuideLLM's ITL)."""
        if len(self.chunk_times) < 2:
            return None
        return (self.chunk_times[-1] - self.chunk_times[0]) / (len(self.chunk_times) - 1)

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in _RECORD_FIELDS}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RequestRecord:
        # Files written by newer versions may carry extra keys: ignore them.
        if d.keys() <= _RECORD_FIELD_SET:
            return cls(**d)
        return cls(**{k: v for k, v in d.items() if k in _RECORD_FIELD_SET})


_RECORD_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(RequestRecord))
_RECORD_FIELD_SET = frozenset(_RECORD_FIELDS)


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
    try:
        data = p.read_bytes()
    except OSError as e:
        raise file_error(p, e) from None
    try:
        return RunResult.from_json_bytes(data)
    except ConfigError as e:
        raise ConfigError(f"{p}: not a valid infersight RunResult: {e}") from None
