"""``tune``'s own settings (``INFERSIGHT_TUNE_*``): the target, the search and the budget.

How each trial loads the server (levels, prompts, seed, SLO) is a bench configuration,
built and checked once by the caller before the first trial, so every trial runs the
same workload.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, ValidationError, model_validator
from pydantic_settings import SettingsConfigDict

from infersight.core.settings import BaseConfig, config_error

__all__ = ["TuneConfig"]


class TuneConfig(BaseConfig):
    """Everything ``infersight tune`` decides besides the trials' workload."""

    model_config = SettingsConfigDict(env_prefix="INFERSIGHT_TUNE_", extra="forbid")

    # Target: the embedded engine (default), a launch template, or a gateway upstream.
    launch: str | None = None
    #: The gateway to tune (its root URL) and the upstream whose limit changes.
    url: str | None = None
    upstream: str | None = None
    health_path: str = "/health"
    start_timeout: float = Field(120.0, gt=0)
    #: The baseline setting: slots (--parallel, --max-num-seqs), threads, context per slot.
    slots: int | None = Field(None, ge=1)
    threads: int | None = Field(None, ge=1)
    ctx: int | None = Field(None, ge=1)
    model: str | None = None
    # Search
    search: Literal["guided", "grid"] = "guided"
    knob: Literal["slots", "threads", "ctx"] | None = None
    values: list[int] = Field(default_factory=list)
    budget: float | None = Field(None, gt=0)
    #: ``--ray ADDRESS``: trials in parallel, one per Ray node (or per
    #: ``gpus_per_trial`` GPUs of a node).
    ray: str | None = None
    gpus_per_trial: int | None = Field(None, ge=1)
    # Output
    out: str | None = None
    progress: bool = True

    @model_validator(mode="after")
    def _check(self) -> TuneConfig:
        if self.launch and self.url:
            raise ValueError(
                "give --launch (tune starts the server) or --url with "
                "--upstream (a running gateway), not both"
            )
        if self.url and not self.upstream:
            raise ValueError(
                "--url names a running gateway: give the --upstream whose "
                "limit tune may change (see its /stats)"
            )
        if self.upstream and not self.url:
            raise ValueError("--upstream needs --url, the gateway's root URL")
        if any(v < 1 for v in self.values):
            raise ValueError("--values must be positive integers")
        if self.ray and not self.launch:
            raise ValueError(
                "--ray runs each trial's server on a node from the --launch template: give --launch"
            )
        if self.gpus_per_trial and not self.ray:
            raise ValueError("--gpus-per-trial needs --ray")
        if not self.health_path.startswith("/"):
            raise ValueError("--health-path must start with /")
        return self

    @property
    def target_kind(self) -> str:
        """ "launch", "gateway" or "embedded"."""
        return "launch" if self.launch else "gateway" if self.url else "embedded"

    @classmethod
    def build(cls, **kwargs: Any) -> TuneConfig:
        """Validate, turning pydantic's report into one ConfigError line."""
        try:
            return cls(**{k: v for k, v in kwargs.items() if v is not None})
        except ValidationError as e:
            raise config_error(e, names="flag") from None
