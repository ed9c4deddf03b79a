"""The sampler protocol every telemetry source implements.

A sampler is polled by the :class:`~infersight.telemetry.recorder.Recorder` once per
interval and returns the readings it took at that moment as :class:`Sample` objects
(``t`` is ``time.monotonic()``; ``value`` None means "not available").
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from infersight.core.records import Sample

__all__ = ["Sampler"]


@runtime_checkable
class Sampler(Protocol):
    """One source of telemetry (GPU, host, an engine's /metrics)."""

    #: Short name used in logs and status lines ("host", "gpu", "engine").
    name: str

    async def sample(self) -> list[Sample]:
        """Take one round of readings. Must not raise for a source that is down:
        report it through values of None or an ``*.up`` sample instead."""
        ...

    async def close(self) -> None:
        """Release sessions, handles and other resources."""
        ...
