"""``tune``'s own settings (``INFERSIGHT_TUNE_*``): the target, the search and the budget.

Each field is declared here once, with its default and help
(:func:`~infersight.flags.declare.flag`); ``tune``'s options are made from it. How each
trial loads the server (levels, prompts, seed, SLO) is a bench configuration, built and
checked once by the caller before the first trial, so every trial runs the same
workload.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from annotated_types import Ge, Gt
from pydantic import ValidationError
from pydantic_settings import SettingsConfigDict

from infersight.core.errors import ConfigError
from infersight.core.settings import BaseConfig, config_error
from infersight.flags.declare import flag, flag_names, settings_model

__all__ = ["TuneConfig"]


@dataclass(frozen=True, slots=True)
class TuneConfig:
    """Everything ``infersight tune`` decides besides the trials' workload."""

    # Target: the embedded engine (default), a launch template, or a gateway upstream.
    launch: str | None = flag(
        None,
        "Command that starts the server for a trial, with {port} and the knobs' placeholders.",
        metavar="TEMPLATE",
    )
    url: str | None = flag(
        None, "A running gateway's root URL: tune its --upstream's limit.", metavar="URL"
    )
    upstream: str | None = flag(
        None,
        "With --url: the gateway upstream whose concurrency limit tune changes.",
        metavar="NAME",
    )
    #: The baseline setting: slots, threads, context per slot.
    slots: Annotated[int, Ge(1)] | None = flag(
        None,
        "Baseline slots: requests decoded at once.",
        names=("--slots", "--parallel", "--max-num-seqs"),
        show_default="8 for the embedded engine, the gateway's limit",
    )
    threads: Annotated[int, Ge(1)] | None = flag(
        None,
        "Baseline compute threads (embedded engine, {threads}).",
        show_default="the physical cores",
    )
    ctx: Annotated[int, Ge(1)] | None = flag(
        None,
        "Baseline context tokens per slot (embedded engine, {ctx_per_slot}).",
        show_default="2048",
    )
    model: str | None = flag(
        None,
        "Model: a GGUF file for the embedded engine, else the id to request.",
        show_default="the embedded default, else the first listed",
    )
    health_path: str = flag(
        "/health",
        "With --launch: the path that answers 200 once the server is ready.",
        metavar="PATH",
    )
    start_timeout: Annotated[float, Gt(0)] = flag(
        120.0,
        "With --launch: how long a server may take to become healthy; past it the trial fails.",
        duration=True,
    )
    # Search
    search: Literal["guided", "grid"] = flag(
        "guided", "'guided': the diagnosis, then bisection; 'grid': every value (the reference)."
    )
    knob: Literal["slots", "threads", "ctx"] | None = flag(
        None, "Search this knob whatever the diagnosis says.", show_default="the diagnosis's"
    )
    values: tuple[int, ...] = flag(
        (),
        "The knob's values to search, e.g. 1,2,4,8,16.",
        metavar="LIST",
        show_default="a ladder around the baseline and the target",
        items=int,
    )
    budget: Annotated[float, Gt(0)] | None = flag(
        None,
        "Bound the whole run's wall time, e.g. 20m; the winner's re-run fits inside.",
        duration=True,
    )
    ray: str | None = flag(
        None,
        "Trials in parallel on a Ray cluster (auto, or HOST:PORT): one per node, its "
        "--launch server and load generator both on that node. Needs the ray extra.",
        metavar="ADDRESS",
    )
    gpus_per_trial: Annotated[int, Ge(1)] | None = flag(
        None,
        "With --ray: one trial per N GPUs of a node, instead of one per node.",
        metavar="N",
        show_default="one trial per node, with all its GPUs",
    )
    # Output
    out: str | None = flag(
        None,
        "Directory for tune.json, tune.html and each trial's RunResult.",
        metavar="DIR",
        names=("--out", "-o"),
        show_default="runs/tune-DATE-TIME",
    )
    progress: bool = flag(True, "Live progress on the terminal.")

    @property
    def target_kind(self) -> str:
        """ "launch", "gateway" or "embedded"."""
        return "launch" if self.launch else "gateway" if self.url else "embedded"

    @classmethod
    def build(cls, **values: Any) -> TuneConfig:
        """Validate the values given (None: not given; the rest from ``INFERSIGHT_TUNE_*``
        or the defaults); a bad value or a clash is one ConfigError line."""
        try:
            flat = _Settings(**{k: v for k, v in values.items() if v is not None})
        except ValidationError as e:
            raise config_error(e, names="flag", flags=flag_names(TuneConfig)) from None
        cfg = cls(**{f.name: getattr(flat, f.name) for f in dataclasses.fields(cls)})
        _check(cfg)
        return cfg


class _Env(BaseConfig):
    model_config = SettingsConfigDict(env_prefix="INFERSIGHT_TUNE_", extra="forbid")


_Settings = settings_model("TuneSettings", _Env, TuneConfig)


def _check(cfg: TuneConfig) -> None:
    """The rules that join several fields."""
    if cfg.launch and cfg.url:
        raise ConfigError(
            "give --launch (tune starts the server) or --url with "
            "--upstream (a running gateway), not both"
        )
    if cfg.url and not cfg.upstream:
        raise ConfigError(
            "--url names a running gateway: give the --upstream whose "
            "limit tune may change (see its /stats)"
        )
    if cfg.upstream and not cfg.url:
        raise ConfigError("--upstream needs --url, the gateway's root URL")
    if any(v < 1 for v in cfg.values):
        raise ConfigError("--values must be positive integers")
    if cfg.ray and not cfg.launch:
        raise ConfigError(
            "--ray runs each trial's server on a node from the --launch template: give --launch"
        )
    if cfg.gpus_per_trial and not cfg.ray:
        raise ConfigError("--gpus-per-trial needs --ray")
    if not cfg.health_path.startswith("/"):
        raise ConfigError("--health-path must start with /")
