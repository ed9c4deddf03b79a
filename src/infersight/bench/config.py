"""Bench configuration: one validated object for the CLI and for ``bench.run()``.

The fields are declared once, in the typed sections of :mod:`infersight.flags.bench`;
this module makes from them the flat settings model that reads ``INFERSIGHT_BENCH_*``
variables and validates keyword arguments (the CLI passes its flags), then checks the
rules that join several fields. ``BenchConfig(url=..., concurrency=[1, 4])`` takes the
fields flat, as users write them, and holds one frozen section per concern
(``cfg.target``, ``cfg.load``, ...): each module of the run receives the section it
reads. The parsers of the compact flag syntaxes (:mod:`infersight.bench.flag_syntax`)
are used by both the CLI and the library, so they agree on them.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError, ValidationInfo, field_validator
from pydantic_settings import SettingsConfigDict

from infersight.bench.datasets import load_dataset
from infersight.bench.distributed.ray_extra import INSTALL_HINT, ray_installed
from infersight.bench.flag_syntax import parse_levels, parse_slo
from infersight.bench.level.spec import LevelSpec, fixed_levels
from infersight.bench.replay.rules import check_replay
from infersight.bench.workload import Distribution
from infersight.core.errors import ConfigError
from infersight.core.pricing import PriceTable
from infersight.core.settings import BaseConfig, config_error
from infersight.flags.bench import (
    ENDPOINTS,
    SECTIONS,
    DistributionSection,
    LoadSection,
    OutputSection,
    ReplaySection,
    TargetSection,
    TelemetrySection,
    WorkloadSection,
)
from infersight.flags.declare import Flag, declared, flag_names, settings_model
from infersight.stats.aggregate import Window

__all__ = ["BenchConfig", "parse_levels", "parse_slo"]


#: Each field's declaration and the section that holds it, by field name.
_FIELDS: dict[str, tuple[str, dataclasses.Field[Any], Flag]] = {
    f.name: (section, f, how) for section, cls in SECTIONS.items() for f, how in declared(cls)
}


#: Each field's flag (``trace_window``: ``--window``).
_FLAGS = flag_names(*SECTIONS.values())


class _Checks(BaseConfig):
    """The flat settings' per-field checks; the fields come from the sections."""

    model_config = SettingsConfigDict(env_prefix="INFERSIGHT_BENCH_", extra="forbid")

    # Validators raise ConfigError (not ValueError) where the message already names
    # the flag: pydantic passes it through as it is, one clear line.
    @field_validator("endpoint", mode="before", check_fields=False)
    @classmethod
    def _endpoint(cls, v: Any) -> Any:
        """vLLM's paths too (``/v1/completions``)."""
        return ENDPOINTS.get(v.rstrip("/"), v) if isinstance(v, str) else v

    @field_validator("slo", mode="before", check_fields=False)
    @classmethod
    def _slo(cls, v: Any) -> Any:
        return parse_slo(v) if isinstance(v, str) else v

    @field_validator("input_tokens", "output_tokens", check_fields=False)
    @classmethod
    def _lengths(cls, v: str | None, info: ValidationInfo) -> str | None:
        if v is not None:
            Distribution.parse(v, _FLAGS[str(info.field_name)])
        return v

    @field_validator("dataset", check_fields=False)
    @classmethod
    def _dataset(cls, v: str | None) -> str | None:
        """Read before anything starts: an unreadable file fails here, not mid-run."""
        if v:
            load_dataset(v)
        return v

    @field_validator("ray", check_fields=False)
    @classmethod
    def _ray(cls, v: str | None) -> str | None:
        """Checked before anything starts: without the extra, say how to install it."""
        if v is not None and not v.strip():
            raise ConfigError("--ray: give 'auto' or the cluster's address (HOST:PORT)")
        if v is not None and not ray_installed():
            raise ConfigError(f"--ray needs Ray, an optional extra: {INSTALL_HINT}")
        return v

    @field_validator("prices", check_fields=False)
    @classmethod
    def _prices(cls, v: str | None) -> str | None:
        if v:
            PriceTable.load(v)
        return v


#: The flat settings model: every section's fields, validated and read from the
#: environment.
_Settings = settings_model("BenchSettings", _Checks, *SECTIONS.values())


class BenchConfig:
    """Everything one ``infersight bench`` run needs. See ``infersight bench --help``.

    Built from the fields flat (``BenchConfig(url=..., concurrency=[1, 4])``), each
    value not given read from ``INFERSIGHT_BENCH_<FIELD>``, else its default. Raises
    pydantic's ValidationError for a bad value and a ConfigError for fields that clash;
    :meth:`build` turns both into one ConfigError line.
    """

    target: TargetSection
    load: LoadSection
    workload: WorkloadSection
    replay: ReplaySection
    distribution: DistributionSection
    output: OutputSection
    telemetry: TelemetrySection

    def __init__(self, **values: Any) -> None:
        flat = _Settings(**values)
        for name, section in SECTIONS.items():
            self.__dict__[name] = section.of(flat)
        _check(self)

    @classmethod
    def build(cls, **values: Any) -> BenchConfig:
        """Validate, turning pydantic's report into one ConfigError line; a None value
        is not given."""
        try:
            return cls(**{k: v for k, v in values.items() if v is not None})
        except ValidationError as e:
            raise config_error(e, names="flag", flags=_FLAGS) from None

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"BenchConfig is frozen: use replace({name}=...)")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BenchConfig) and self.__dict__ == other.__dict__

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"BenchConfig({', '.join(f'{k}={v!r}' for k, v in self.given_values().items())})"

    if not TYPE_CHECKING:
        # Flat reads (``cfg.concurrency``) for callers written against the flat object;
        # typed code reads the sections.
        def __getattr__(self, name: str) -> Any:
            if name.startswith("_") or name not in _FIELDS:
                raise AttributeError(name)
            return self.as_dict()[name]

    def value(self, name: str) -> Any:
        """One field's value by its flat name."""
        return getattr(getattr(self, _FIELDS[name][0]), name)

    def as_dict(self) -> dict[str, Any]:
        """Every field flat, JSON-ready (lists for tuples): the RunResult's ``config``."""
        out: dict[str, Any] = {}
        for name in _FIELDS:
            v = self.value(name)
            out[name] = list(v) if isinstance(v, tuple) else dict(v) if name == "slo" else v
        return out

    def given_values(self) -> dict[str, Any]:
        """The fields set to something other than their default, flat."""
        return {k: v for k, v in self.as_dict().items() if self.given_fields(k)}

    def given_fields(self, *names: str) -> list[str]:
        """The fields of ``names`` set to something other than their default."""
        out = []
        for n in names:
            f = _FIELDS[n][1]
            default = f.default_factory() if callable(f.default_factory) else f.default
            if self.value(n) not in (None, (), {}, default):
                out.append(n)
        return out

    def given(self, *names: str) -> list[str]:
        """The flags of ``names`` set to something other than their default."""
        return [_FLAGS[n] for n in self.given_fields(*names)]

    def replace(self, **values: Any) -> BenchConfig:
        """A copy with these fields changed, checked again."""
        return BenchConfig(**{**self.as_dict(), **values})

    def window(self) -> Window:
        """The measurement window (``--warmup``, ``--cooldown``)."""
        return Window.parse(self.load.warmup, self.load.cooldown)

    def levels(self) -> list[LevelSpec]:
        """The fixed levels to run (:func:`~infersight.bench.level.spec.fixed_levels`)."""
        return fixed_levels(self.load, self.replay)


def _check(cfg: BenchConfig) -> None:
    """The rules that join several fields, one ConfigError line each."""
    load, telemetry, output = cfg.load, cfg.telemetry, cfg.output
    if load.find_max and not load.slo:
        raise ConfigError("--find-max needs --slo (the goal the rate must meet)")
    picked = sum(bool(x) for x in (load.concurrency, load.rate, load.sweep, load.find_max))
    if picked > 1:
        raise ConfigError("choose one of --concurrency, --rate, --sweep, --find-max")
    if load.repeat > 1 and (load.sweep or load.find_max):
        raise ConfigError(
            "--repeat runs fixed levels again: use it with --concurrency or --rate, "
            "not --sweep or --find-max"
        )
    if any(c < 1 for c in load.concurrency):
        raise ConfigError("--concurrency values must be >= 1")
    if any(not (r > 0) for r in load.rate):
        raise ConfigError("--rate values must be > 0")
    if telemetry.no_scrape and telemetry.scrape:
        raise ConfigError("give --scrape or --no-scrape, not both")
    if (output.price_in is None) != (output.price_out is None):
        raise ConfigError("give both --price-in and --price-out (dollars per million tokens)")
    Window.parse(load.warmup, load.cooldown)
    check_replay(cfg.replay, cfg.given)
