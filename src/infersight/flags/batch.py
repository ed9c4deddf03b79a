"""``batch``'s settings (``INFERSIGHT_BATCH_*``), each field declared once with its
default, constraints and help; ``infersight batch``'s options are made from them."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from annotated_types import Ge, Gt
from pydantic import ValidationError
from pydantic_settings import SettingsConfigDict

from infersight.core.errors import ConfigError
from infersight.core.settings import BaseConfig, config_error
from infersight.flags.declare import (
    API_KEY_ENV_HELP,
    API_KEY_FILE_HELP,
    URL_HELP,
    flag,
    flag_names,
    settings_model,
)

__all__ = ["BatchConfig"]


@dataclass(frozen=True, slots=True, init=False)
class BatchConfig:
    """Everything ``infersight batch`` / :func:`infersight.batch.run_batch` takes.

    ``BatchConfig(input=..., output=..., url=...)``: each value not given is read from
    ``INFERSIGHT_BATCH_<FIELD>``, else its default; pydantic's ValidationError for a bad
    value, a ConfigError for fields that clash (:meth:`build`: one ConfigError line).
    """

    input: Path = flag(
        help="JSONL: OpenAI Batch lines, or one prompt / messages list per line.",
        metavar="INPUT",
        argument=True,
    )
    output: Path = flag(
        help="Output JSONL (OpenAI Batch output format). A rerun resumes it.",
        metavar="FILE",
        names=("--out", "-o"),
    )
    #: With or without ``/v1``; None: the command starts the embedded engine.
    url: str | None = flag(None, URL_HELP, metavar="URL", show_default="start the embedded engine")
    api_key_env: str | None = flag(None, API_KEY_ENV_HELP, metavar="VAR")
    api_key_file: str | None = flag(None, API_KEY_FILE_HELP, metavar="FILE")
    model: str | None = flag(
        None, "Model for rows that name none.", show_default="the server's first"
    )
    max_tokens: Annotated[int, Ge(1)] | None = flag(None, "max_tokens for rows that set none.")
    concurrency: Annotated[int, Ge(1)] | None = flag(
        None, "Fixed number of requests kept in flight.", show_default="adaptive"
    )
    start_concurrency: Annotated[int, Ge(1)] = flag(2, "Adaptive: where to start.")
    min_concurrency: Annotated[int, Ge(1)] = flag(1, "Adaptive: the lower bound.")
    max_concurrency: Annotated[int, Ge(1)] = flag(
        256, "Adaptive: at most this many requests in flight."
    )
    max_latency: Annotated[float, Gt(0)] | None = flag(
        None, "Adaptive: keep p90 request latency under this.", duration=True
    )
    ttft_slo: Annotated[float, Gt(0)] | None = flag(
        None, "Adaptive: keep p90 TTFT under this; streams requests.", duration=True
    )
    tpot_slo: Annotated[float, Gt(0)] | None = flag(
        None, "Adaptive: keep p90 TPOT under this; streams requests.", duration=True
    )
    max_cost: Annotated[float, Ge(0)] | None = flag(
        None, "Stop scheduling rows when the projected total $ would exceed this."
    )
    prices: Path | None = flag(
        None, "Price table TOML ($ per million tokens per model).", metavar="FILE"
    )
    price_in: Annotated[float, Ge(0)] | None = flag(None, "Flat $ per million input tokens.")
    price_out: Annotated[float, Ge(0)] | None = flag(None, "Flat $ per million output tokens.")
    on_bad_line: Literal["stop", "skip"] = flag(
        "stop", "What an invalid input line does: stop the run, or skip the line."
    )
    retry_failed: bool = flag(False, "Run again only the rows the output holds as failed.")
    #: The first attempt included.
    max_attempts: Annotated[int, Ge(1)] = flag(
        5, "Attempts per row for retryable errors (429, 503, connect...)."
    )
    timeout: Annotated[float, Gt(0)] = flag(600.0, "How long one attempt may take.", duration=True)
    grace: Annotated[float, Ge(0)] = flag(
        10.0, "How long Ctrl-C waits for rows in flight before cancelling them.", duration=True
    )
    fsync: bool = flag(True, "fsync the output after each write batch (the checkpoint).", cli=False)
    engine_parallel: Annotated[int, Ge(1)] = flag(
        8,
        "Embedded engine: slots, requests decoded together (without --url).",
        names=("--parallel",),
    )
    quiet: bool = flag(False, "No progress output.", names=("--quiet", "-q"))
    progress_interval: Annotated[float, Gt(0)] = flag(
        10.0,
        "Seconds between progress lines when stderr is not a terminal (CI, nohup, a pipe).",
        cli=False,
    )

    def __init__(self, **values: Any) -> None:
        flat = _Settings(**values)
        for f in dataclasses.fields(self):
            object.__setattr__(self, f.name, getattr(flat, f.name))
        if (self.price_in is None) != (self.price_out is None):
            raise ConfigError("give both --price-in and --price-out, or neither")
        if self.min_concurrency > self.max_concurrency:
            raise ConfigError("--min-concurrency is above --max-concurrency")

    @classmethod
    def build(cls, **values: Any) -> BatchConfig:
        """Validate like the CLI does: a bad value is one ConfigError line."""
        try:
            return cls(**values)
        except ValidationError as e:
            raise config_error(e, names="flag", flags=flag_names(BatchConfig)) from None


class _Env(BaseConfig):
    model_config = SettingsConfigDict(env_prefix="INFERSIGHT_BATCH_", extra="ignore")


_Settings = settings_model("BatchSettings", _Env, BatchConfig)
