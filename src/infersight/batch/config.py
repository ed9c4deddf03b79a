"""Settings of a batch run (flags override ``INFERSIGHT_BATCH_*`` environment)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError, model_validator
from pydantic_settings import SettingsConfigDict

from infersight.core.settings import BaseConfig, config_error

__all__ = ["BatchConfig"]


class BatchConfig(BaseConfig):
    """Everything ``infersight batch`` / :func:`infersight.batch.run_batch` takes."""

    model_config = SettingsConfigDict(env_prefix="INFERSIGHT_BATCH_", extra="ignore")

    input: Path
    output: Path
    #: Target server (``http://host:port``, with or without ``/v1``); None: the
    #: ``infersight batch`` command starts the embedded engine for the run.
    url: str | None = None
    #: Name of the env var holding the API key / a file holding it.
    api_key_env: str | None = None
    api_key_file: str | None = None
    #: Model for rows whose body names none (default: the server's first model).
    model: str | None = None
    #: max_tokens for rows whose body sets none.
    max_tokens: int | None = Field(default=None, ge=1)
    #: Fixed concurrency; None = adaptive.
    concurrency: int | None = Field(default=None, ge=1)
    start_concurrency: int = Field(default=2, ge=1)
    min_concurrency: int = Field(default=1, ge=1)
    max_concurrency: int = Field(default=256, ge=1)
    #: p90 end-to-end latency limit for the adaptive limiter (seconds).
    max_latency: float | None = Field(default=None, gt=0)
    #: p90 TTFT / TPOT SLOs (seconds); either one makes requests stream.
    ttft_slo: float | None = Field(default=None, gt=0)
    tpot_slo: float | None = Field(default=None, gt=0)
    max_cost: float | None = Field(default=None, ge=0)
    prices: Path | None = None
    price_in: float | None = Field(default=None, ge=0)
    price_out: float | None = Field(default=None, ge=0)
    on_bad_line: Literal["stop", "skip"] = "stop"
    retry_failed: bool = False
    #: Attempts per row, the first included (retryable errors only).
    max_attempts: int = Field(default=5, ge=1)
    #: Seconds one attempt may take.
    timeout: float = Field(default=600.0, gt=0)
    #: Seconds Ctrl-C waits for requests in flight before cancelling them.
    grace: float = Field(default=10.0, ge=0)
    #: fsync the output after each write batch (the checkpoint).
    fsync: bool = True
    #: Slots of the embedded engine when no --url is given.
    engine_parallel: int = Field(default=8, ge=1)
    quiet: bool = False
    #: Seconds between progress lines when stderr is not a terminal (CI, nohup, a pipe).
    progress_interval: float = Field(default=10.0, gt=0)

    @model_validator(mode="after")
    def _check(self) -> BatchConfig:
        if (self.price_in is None) != (self.price_out is None):
            raise ValueError("give both --price-in and --price-out, or neither")
        if self.min_concurrency > self.max_concurrency:
            raise ValueError("--min-concurrency is above --max-concurrency")
        return self

    @classmethod
    def build(cls, **kwargs: object) -> BatchConfig:
        """Validate like the CLI does: a bad value is one ConfigError line."""
        try:
            return cls(**kwargs)  # type: ignore[arg-type]
        except ValidationError as e:
            raise config_error(e, names="flag") from None
