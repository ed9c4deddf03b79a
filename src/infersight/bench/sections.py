"""The bench configuration in typed sections: each module receives only what it reads.

:class:`~infersight.bench.config.BenchConfig` stays the one flat object users see (its
flags, ``INFERSIGHT_BENCH_*`` variables and the RunResult's ``config`` are flat) and
validates every field; its properties (``cfg.target``, ``cfg.load``, ...) hand out these
frozen sections. Every field of BenchConfig belongs to exactly one section
(``tests/unit/bench/test_bench_sections.py`` checks it). The sections are plain
dataclasses so that they pickle across ``--workers`` processes and Ray actors.

This module imports nothing of bench but the level type: whatever takes a section
sits one step above a leaf, not above the configuration and its trace checks.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, Self

from infersight.bench.level_spec import LevelSpec, rate_name
from infersight.stats.aggregate import Window

__all__ = [
    "SECTIONS",
    "DistributionSection",
    "LoadSection",
    "OutputSection",
    "ReplaySection",
    "TargetSection",
    "TelemetrySection",
    "WorkloadSection",
    "fixed_levels",
]


class _Section:
    """Built from any object with the section's fields as attributes (BenchConfig)."""

    __slots__ = ()

    @classmethod
    def of(cls, source: Any) -> Self:
        values = {}
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]
            v = getattr(source, f.name)
            # lists become tuples and mappings copies: a section cannot change under
            # the modules that share it
            values[f.name] = tuple(v) if isinstance(v, list) else v
            if isinstance(v, Mapping):
                values[f.name] = dict(v)
        return cls(**values)


@dataclass(frozen=True, slots=True)
class TargetSection(_Section):
    """The server under test and how requests reach it."""

    url: str | None = None
    model: str | None = None
    api_key_env: str | None = None
    api_key_file: str | None = None
    endpoint: Literal["chat", "completions"] = "chat"
    stream: bool = True
    timeout: float = 600.0
    engine_parallel: int = 8
    engine_ctx: int | None = None
    engine_slots: int | None = None


@dataclass(frozen=True, slots=True)
class LoadSection(_Section):
    """How much load, for how long, and the goals adaptive levels search for."""

    concurrency: tuple[int, ...] = ()
    rate: tuple[float, ...] = ()
    arrival: Literal["constant", "poisson", "gamma"] = "constant"
    burstiness: float = 1.0
    sweep: Literal["auto", "closed"] | None = None
    sweep_levels: int = 4
    requests: int | None = None
    duration: float | None = None
    warmup: str = "auto"
    cooldown: str = "auto"
    repeat: int = 1
    max_concurrency: int = 0
    grace: float = 5.0
    slo: Mapping[str, float] = dataclasses.field(default_factory=dict)
    find_max: bool = False
    find_max_steps: int = 5

    @property
    def open_arrival(self) -> str:
        """The arrival process of open-loop levels (``--burstiness`` implies gamma)."""
        return "gamma" if self.arrival == "gamma" or self.burstiness != 1.0 else self.arrival

    def window(self) -> Window:
        """The measurement window (``--warmup``, ``--cooldown``)."""
        return Window.parse(self.warmup, self.cooldown)

    def effective_requests(self) -> int | None:
        """Requests per level: 64 when neither a count nor a duration is given."""
        if self.requests is None and self.duration is None:
            return 64
        return self.requests


@dataclass(frozen=True, slots=True)
class WorkloadSection(_Section):
    """What the synthetic or dataset requests contain."""

    input_tokens: str = "fixed:64"
    output_tokens: str | None = None
    max_tokens: int = 128
    dataset: str | None = None
    shared_prefix: int = 0
    ignore_eos: bool = False
    seed: int = 0


@dataclass(frozen=True, slots=True)
class ReplaySection(_Section):
    """A trace replayed at its own times (``--trace``) or conversations (``--sessions``)."""

    trace: str | None = None
    trace_format: Literal["gateway", "mooncake", "burstgpt", "csv"] | None = None
    speedup: tuple[float, ...] = ()
    trace_window: str | None = None
    on_bad_line: Literal["error", "skip"] = "error"
    block_size: int = 512
    sessions: int | None = None
    turns: str = "fixed:4"
    think_time: str = "0s"

    @property
    def active(self) -> bool:
        """A replay or conversation run (its levels build their own requests)."""
        return bool(self.trace or self.sessions)


@dataclass(frozen=True, slots=True)
class DistributionSection(_Section):
    """Where the load comes from: this process, ``--workers`` processes or Ray actors."""

    workers: int = 1
    ray: str | None = None
    ray_strategy: Literal["spread", "strict-spread"] = "spread"
    ray_cpus: float = 1.0
    ray_clock_interval: float = 10.0


@dataclass(frozen=True, slots=True)
class OutputSection(_Section):
    """What is printed, written, priced and diagnosed after the run."""

    out: str | None = None
    result_filename: str | None = None
    percentile_metrics: tuple[str, ...] = ()
    metric_percentiles: tuple[float, ...] = (99.0,)
    price_in: float | None = None
    price_out: float | None = None
    prices: str | None = None
    diagnose: bool = True
    progress: bool = True


@dataclass(frozen=True, slots=True)
class TelemetrySection(_Section):
    """What is sampled during the run besides the requests."""

    scrape: tuple[str, ...] = ()
    no_scrape: bool = False
    sample_interval: float = 1.0


#: Each section by the name of the BenchConfig property that hands it out.
SECTIONS: dict[str, type[_Section]] = {
    "target": TargetSection,
    "load": LoadSection,
    "workload": WorkloadSection,
    "replay": ReplaySection,
    "distribution": DistributionSection,
    "output": OutputSection,
    "telemetry": TelemetrySection,
}


def fixed_levels(load: LoadSection, replay: ReplaySection) -> list[LevelSpec]:
    """The fixed levels to run; sweeps and --find-max add theirs as they go. With
    ``repeat`` N > 1, every level N times, interleaved: ``c=1#1, c=4#1, c=1#2, ...``,
    so a drift of the server over time spreads over all levels alike."""
    if replay.trace:
        return [LevelSpec(f"trace x{s:g}", speedup=s) for s in replay.speedup or (1.0,)]
    if load.rate:
        arrival = load.open_arrival
        base = [LevelSpec(rate_name(r), rate=r, arrival=arrival) for r in load.rate]
    elif load.sweep or load.find_max:
        return []
    else:
        base = [LevelSpec(f"c={c}", concurrency=c) for c in (load.concurrency or (1,))]
    if load.repeat == 1:
        return base
    return [
        dataclasses.replace(lv, name=f"{lv.name}#{k}", repeat_of=lv.name)
        for k in range(1, load.repeat + 1)
        for lv in base
    ]
