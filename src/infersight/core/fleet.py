"""Fleet documents: the replicas found in a metrics store (Prometheus), the pages of
their series read from it, and the fleet diagnosis written from them.

They are shared by ``telemetry`` (which reads a store and fills pages), ``diagnose``
(which turns pages into verdicts per replica and per window, and a fleet summary) and
``report`` (which renders the summary), so none of those imports another.

Times are Unix seconds (the store's clock), not the monotonic seconds of a RunResult.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pydantic import BaseModel, Field

from infersight.core.verdicts import Verdict

__all__ = [
    "FleetGroup",
    "FleetPage",
    "FleetReport",
    "ReplicaDiagnosis",
    "ReplicaInfo",
    "SeriesArrays",
    "WorstWindow",
]


@dataclass(frozen=True, slots=True)
class SeriesArrays:
    """One normalised series of one replica: ``name`` is a sample name of
    ``infersight.telemetry`` (``engine.requests_running``, ``gpu.utilization``...);
    ``t`` (Unix seconds, ascending) and ``v`` have the same length."""

    name: str
    labels: dict[str, str]
    t: np.ndarray
    v: np.ndarray


@dataclass(slots=True)
class FleetPage:
    """The series of every replica over ``[start, end)``; pages follow each other in
    time, so a reader holds one page at a time whatever the range."""

    start: float
    end: float
    series: dict[str, list[SeriesArrays]] = field(default_factory=dict)

    @property
    def points(self) -> int:
        return sum(int(s.t.size) for ss in self.series.values() for s in ss)


class ReplicaInfo(BaseModel):
    """One serving replica as the store shows it, with where its series came from."""

    id: str
    #: engines.toml key (vllm, sglang, tgi, llamacpp, infersight) or "unknown".
    engine: str = "unknown"
    #: The served model (the engine's ``model_name`` label), else the scrape job.
    model: str = ""
    job: str = ""
    instance: str = ""
    namespace: str = ""
    pod: str = ""
    host: str = ""
    #: GPUs joined to this replica ("UUID" or "host/gpu index").
    gpus: list[str] = Field(default_factory=list)
    #: How the GPUs were joined: "pod", "host", "instance" or "".
    gpu_join: str = ""
    #: The exporters whose series feed this replica.
    sources: list[str] = Field(default_factory=list)


class ReplicaDiagnosis(BaseModel):
    """One replica's verdicts over the range (consecutive windows with the same verdict
    merged) and its means over the range."""

    replica: ReplicaInfo
    verdicts: list[Verdict] = Field(default_factory=list)
    #: The verdict that covers the most time (a problem verdict before ``healthy``).
    main: str = "healthy"
    main_title: str = "Healthy"
    #: Means over the range: R, Q, S, kv, U, SM, busy, ttft_p99, itl_p50 (None: not exported).
    stats: dict[str, float | None] = Field(default_factory=dict)


class WorstWindow(BaseModel):
    """A window where requests waited longest (queued request-seconds)."""

    replica: str
    verdict: str
    title: str
    start: float
    end: float
    waiting: float | None = None
    ttft_p99: float | None = None
    queued_request_seconds: float = 0.0


class FleetGroup(BaseModel):
    """Replicas whose main verdict is ``verdict``."""

    verdict: str
    title: str
    replicas: list[str]


class FleetReport(BaseModel):
    """What ``diagnose --prometheus`` found over a range, for the console, JSON and HTML."""

    #: The store, without credentials.
    source: str = ""
    selector: str = ""
    start: float
    end: float
    step: float
    window: float
    headline: list[str] = Field(default_factory=list)
    groups: list[FleetGroup] = Field(default_factory=list)
    #: Fleet-level verdicts (load imbalance across replicas of one model).
    balance: list[Verdict] = Field(default_factory=list)
    worst: list[WorstWindow] = Field(default_factory=list)
    replicas: list[ReplicaDiagnosis] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    #: Query statistics (pages, queries, points) for the curious.
    stats: dict[str, Any] = Field(default_factory=dict)
