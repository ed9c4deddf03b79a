"""Ray workers' outcomes placed on the driver's clock: each worker's records and samples
shifted by its measured clock offset, the drift the remeasurements prove noted, and
what the RunResult keeps of each worker (host, clock, load) per level."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from infersight.bench.clock import OffsetEstimate, proven_drift, shift_record, shift_sample
from infersight.bench.level.work import LevelOutcome
from infersight.core.records import Sample

__all__ = ["RayLevelOutcome", "on_driver_clock"]

#: A proven clock drift above this is noted (cross-host timing is good to about it).
DRIFT_NOTE_S = 0.001


@dataclass(slots=True)
class RayLevelOutcome(LevelOutcome):
    """A level's merged outcome plus, per worker, where it ran, its clock and its
    load (for the per-worker client-limited flag), and the workers' samples."""

    workers: list[dict[str, Any]] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)

    def loads(self) -> dict[str, dict[str, Any]]:
        """``aggregate(workers=...)``: each worker's host and CPU, by worker label."""
        return {
            str(w["worker"]): {"host": w["host"], "cpu_percent": w["cpu_percent"]}
            for w in self.workers
        }


def on_driver_clock(
    level: str,
    results: dict[int, tuple[LevelOutcome, list[Sample]]],
    start: list[OffsetEstimate],
    remeasured: list[list[OffsetEstimate]],
    where: list[dict[str, Any]],
    clocks: list[list[dict[str, Any]]],
    notes: list[str],
) -> tuple[list[LevelOutcome], list[dict[str, Any]], list[Sample]]:
    """Shift each worker's records and samples (in place) by its offset at the level's
    start; append each worker's clock to ``clocks`` and a proven drift to ``notes``.
    Returns the outcomes to merge, each worker's description and the samples."""
    parts: list[LevelOutcome] = []
    workers: list[dict[str, Any]] = []
    samples: list[Sample] = []
    for i, (outcome, own) in sorted(results.items()):
        est, host = start[i], where[i]
        for rec in outcome.records:
            shift_record(rec, est.offset)
        labels = {"host": str(host["host"]), "worker": str(i)}
        samples += [shift_sample(s, est.offset, labels) for s in own]
        parts.append(outcome)
        drift = max((proven_drift(est, e) for e in remeasured[i]), default=0.0)
        clocks[i].append(
            {
                "level": level,
                **est.as_dict(),
                "drift_s": drift,
                "remeasured": [e.as_dict() for e in remeasured[i]],
            }
        )
        if drift > DRIFT_NOTE_S:
            notes.append(
                f"level {level}: worker {i}'s clock ({host['host']}) drifted at least "
                f"{drift * 1e3:.1f} ms from the driver's; its records are placed to "
                f"± {(est.uncertainty + drift) * 1e3:.1f} ms on the driver's time axis"
            )
        workers.append(
            {
                **host,
                "offset_s": est.offset,
                "uncertainty_s": est.uncertainty,
                "drift_s": drift,
                "cpu_percent": outcome.cpu_percent,
                "cpu_seconds": outcome.cpu_seconds,
                "requests": len(outcome.records),
            }
        )
    return parts, workers, samples
