"""Bench configuration: one validated object for the CLI and for ``bench.run()``.

Settings come from ``INFERSIGHT_BENCH_*`` environment variables, overridden by the
keyword arguments (the CLI passes its flags). The parsers of the compact flag syntaxes
(:mod:`infersight.bench.flag_syntax`) are used by both, so the CLI and the library agree
on them. The modules that run the benchmark receive the configuration's typed sections
(:mod:`infersight.bench.sections`), not this object.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, ValidationError, ValidationInfo, field_validator, model_validator
from pydantic_settings import SettingsConfigDict

from infersight.bench.flag_syntax import parse_levels, parse_slo
from infersight.bench.level_spec import LevelSpec
from infersight.bench.replay.rules import check_replay
from infersight.bench.sections import (
    DistributionSection,
    LoadSection,
    OutputSection,
    ReplaySection,
    TargetSection,
    TelemetrySection,
    WorkloadSection,
    fixed_levels,
)
from infersight.core.errors import ConfigError
from infersight.core.settings import BaseConfig, config_error
from infersight.stats.aggregate import Window

__all__ = ["BenchConfig", "LevelSpec", "parse_levels", "parse_slo"]


#: Fields whose flag has another name.
_FLAGS = {"trace_window": "--window"}


class BenchConfig(BaseConfig):
    """Everything one ``infersight bench`` run needs. See ``infersight bench --help``."""

    model_config = SettingsConfigDict(env_prefix="INFERSIGHT_BENCH_", extra="forbid")

    # Target
    url: str | None = None
    model: str | None = None
    api_key_env: str | None = None
    api_key_file: str | None = None
    endpoint: Literal["chat", "completions"] = "chat"
    stream: bool = True
    timeout: float = Field(600.0, gt=0)
    # Embedded engine (used when url is None)
    engine_parallel: int = Field(8, ge=1)
    engine_ctx: int | None = None
    #: The target's slot / sequence limit, stated by the user (vLLM exports none); kept
    #: in the RunResult config so `diagnose` of the file uses it.
    engine_slots: int | None = Field(None, ge=1)
    # Load
    concurrency: list[int] = Field(default_factory=list)
    rate: list[float] = Field(default_factory=list)
    arrival: Literal["constant", "poisson", "gamma"] = "constant"
    burstiness: float = Field(1.0, gt=0)
    sweep: Literal["auto", "closed"] | None = None
    sweep_levels: int = Field(4, ge=1, le=20)
    requests: int | None = Field(None, ge=1)
    duration: float | None = Field(None, gt=0)
    warmup: str = "auto"
    cooldown: str = "auto"
    workers: int = Field(1, ge=1, le=64)
    #: Run each level this many times, interleaved (all levels, then all again), so
    #: comparisons use runs as their units (docs/design.md section 2).
    repeat: int = Field(1, ge=1, le=100)
    #: Open loop: at most this many requests in flight (0 = no cap); requests beyond it
    #: wait in the client, and that wait counts in their latency and schedule lag.
    max_concurrency: int = Field(0, ge=0)
    grace: float = Field(5.0, ge=0)
    #: Place the workers as Ray actors on this cluster ("auto": the one this host
    #: belongs to, or RAY_ADDRESS) instead of local processes.
    ray: str | None = None
    #: "spread": Ray's SPREAD (best effort); "strict-spread": one worker per node.
    ray_strategy: Literal["spread", "strict-spread"] = "spread"
    #: CPUs each Ray worker reserves (one event loop drives about one core).
    ray_cpus: float = Field(1.0, gt=0)
    #: Seconds between clock-offset measurements during a level (Ray workers).
    ray_clock_interval: float = Field(10.0, gt=0)
    # Workload
    input_tokens: str = "fixed:64"
    output_tokens: str | None = None
    max_tokens: int = Field(128, ge=1)
    dataset: str | None = None
    shared_prefix: int = Field(0, ge=0)
    ignore_eos: bool = False
    seed: int = 0
    # Trace replay and conversations (bench --trace, --sessions: bench/replay/rules.py)
    #: A trace to replay at its own times: the gateway's access log, Mooncake JSONL,
    #: BurstGPT CSV or a plain timestamp,input_tokens,output_tokens CSV.
    trace: str | None = None
    trace_format: Literal["gateway", "mooncake", "burstgpt", "csv"] | None = None
    #: One level per value: the trace's times divided by it.
    speedup: list[float] = Field(default_factory=list)
    #: ``START-END`` of the trace to replay (durations from its first request).
    trace_window: str | None = None
    on_bad_line: Literal["error", "skip"] = "error"
    #: Tokens a Mooncake hash id stands for.
    block_size: int = Field(512, ge=1)
    #: Synthetic conversations per level (each turn sends the whole history).
    sessions: int | None = Field(None, ge=1)
    turns: str = "fixed:4"
    think_time: str = "0s"
    # Goals
    slo: dict[str, float] = Field(default_factory=dict)
    find_max: bool = False
    find_max_steps: int = Field(5, ge=1, le=20)
    # Telemetry, outputs, cost
    scrape: list[str] = Field(default_factory=list)
    #: Scrape nothing (by default the target's own /metrics is scraped when it answers).
    no_scrape: bool = False
    sample_interval: float = Field(1.0, gt=0)
    out: str | None = None
    #: The RunResult JSON's file name inside ``out`` (vLLM's --result-filename).
    result_filename: str | None = None
    #: Extra console lines, as vLLM prints them: mean, median and these percentiles
    #: of these metrics (record attributes ttft, tpot, itl, e2e), per level.
    percentile_metrics: list[str] = Field(default_factory=list)
    metric_percentiles: list[float] = Field(default_factory=lambda: [99.0])
    price_in: float | None = Field(None, ge=0)
    price_out: float | None = Field(None, ge=0)
    prices: str | None = None
    diagnose: bool = True
    progress: bool = True

    # Validators raise ConfigError (not ValueError) where the message already names
    # the flag: pydantic passes it through as it is, one clear line.
    @field_validator("slo", mode="before")
    @classmethod
    def _slo(cls, v: Any) -> Any:
        return parse_slo(v) if isinstance(v, str) else v

    @field_validator("input_tokens", "output_tokens")
    @classmethod
    def _lengths(cls, v: str | None, info: ValidationInfo) -> str | None:
        from infersight.bench.workload import Distribution

        if v is not None:
            Distribution.parse(v, "--" + str(info.field_name).replace("_", "-"))
        return v

    @field_validator("dataset")
    @classmethod
    def _dataset(cls, v: str | None) -> str | None:
        """Read before anything starts: an unreadable file fails here, not mid-run."""
        from infersight.bench.datasets import load_dataset

        if v:
            load_dataset(v)
        return v

    @field_validator("ray")
    @classmethod
    def _ray(cls, v: str | None) -> str | None:
        """Checked before anything starts: without the extra, say how to install it."""
        from infersight.bench.distributed.ray_extra import INSTALL_HINT, ray_installed

        if v is not None and not v.strip():
            raise ConfigError("--ray: give 'auto' or the cluster's address (HOST:PORT)")
        if v is not None and not ray_installed():
            raise ConfigError(f"--ray needs Ray, an optional extra: {INSTALL_HINT}")
        return v

    @field_validator("prices")
    @classmethod
    def _prices(cls, v: str | None) -> str | None:
        from infersight.core.pricing import PriceTable

        if v:
            PriceTable.load(v)
        return v

    @model_validator(mode="after")
    def _check(self) -> BenchConfig:
        if self.find_max and not self.slo:
            raise ValueError("--find-max needs --slo (the goal the rate must meet)")
        picked = sum(bool(x) for x in (self.concurrency, self.rate, self.sweep, self.find_max))
        if picked > 1:
            raise ValueError("choose one of --concurrency, --rate, --sweep, --find-max")
        if self.repeat > 1 and (self.sweep or self.find_max):
            raise ValueError(
                "--repeat runs fixed levels again: use it with --concurrency or --rate, "
                "not --sweep or --find-max"
            )
        if any(c < 1 for c in self.concurrency):
            raise ValueError("--concurrency values must be >= 1")
        if any(not (r > 0) for r in self.rate):
            raise ValueError("--rate values must be > 0")
        if self.no_scrape and self.scrape:
            raise ValueError("give --scrape or --no-scrape, not both")
        if (self.price_in is None) != (self.price_out is None):
            raise ValueError("give both --price-in and --price-out (dollars per million tokens)")
        Window.parse(self.warmup, self.cooldown)
        check_replay(self)
        return self

    def given(self, *names: str) -> list[str]:
        """The flags of ``names`` set to something other than their default."""
        defaults = type(self).model_fields
        return [
            _FLAGS.get(n, "--" + n.replace("_", "-"))
            for n in names
            if getattr(self, n) not in (None, [], defaults[n].default)
        ]

    def window(self) -> Window:
        return self.load.window()

    def levels(self) -> list[LevelSpec]:
        """The fixed levels to run (:func:`~infersight.bench.sections.fixed_levels`)."""
        return fixed_levels(self.load, self.replay)

    def effective_requests(self) -> int | None:
        return self.load.effective_requests()

    # The sections, copied at each call: each module receives the one(s) it reads
    # (docs/design.md section 1); the runner splits the configuration once per run.
    @property
    def target(self) -> TargetSection:
        """The server under test and how requests reach it."""
        return TargetSection.of(self)

    @property
    def load(self) -> LoadSection:
        """Levels, arrivals, counts, window and goals."""
        return LoadSection.of(self)

    @property
    def workload(self) -> WorkloadSection:
        """What the requests contain."""
        return WorkloadSection.of(self)

    @property
    def replay(self) -> ReplaySection:
        """``--trace`` and ``--sessions`` and their options."""
        return ReplaySection.of(self)

    @property
    def distribution(self) -> DistributionSection:
        """``--workers`` and ``--ray``."""
        return DistributionSection.of(self)

    @property
    def output(self) -> OutputSection:
        """Files, console lines, prices, diagnosis and progress."""
        return OutputSection.of(self)

    @property
    def telemetry(self) -> TelemetrySection:
        """What is sampled besides the requests."""
        return TelemetrySection.of(self)

    @classmethod
    def build(cls, **kwargs: Any) -> BenchConfig:
        """Validate, turning pydantic's report into one ConfigError line."""
        try:
            return cls(**{k: v for k, v in kwargs.items() if v is not None})
        except ValidationError as e:
            raise config_error(e, names="flag") from None
