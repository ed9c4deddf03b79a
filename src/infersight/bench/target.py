"""The server under test as the run knows it: a :class:`Target`, made by
:func:`infersight.bench.target_check.open_target` once it has checked the server, and
handed to the runner, the telemetry and the replay levels, none of which needs the
check (or the configuration) for it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Target"]


@dataclass(slots=True)
class Target:
    """Where the load goes, and what we learnt about it."""

    base_url: str
    api_key: str | None
    api_key_source: str | None
    model: str
    path: str
    engine_info: dict[str, Any]
    engine_pid: int | None = None
    metrics_url: str | None = None
    slots: int | None = None
    #: Whether the server was started for this run (its model and metrics are known).
    started: bool = False
    notes: list[str] = field(default_factory=list)
