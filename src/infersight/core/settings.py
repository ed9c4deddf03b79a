"""Configuration shared by the CLI and the environment (prefix ``INFERSIGHT_``).

Each feature package defines its own settings class deriving from :class:`BaseConfig`
with a longer prefix (``INFERSIGHT_GATEWAY_``, ``INFERSIGHT_BENCH_``...). CLI flags
override the environment; the environment overrides defaults. Whoever builds a
settings object turns pydantic's report into one line with :func:`config_error`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from infersight.core.errors import ConfigError

__all__ = ["BaseConfig", "config_error"]


class BaseConfig(BaseSettings):
    """Base for every settings class: env prefix ``INFERSIGHT_``, unknown keys ignored."""

    model_config = SettingsConfigDict(env_prefix="INFERSIGHT_", extra="ignore")


def config_error(
    e: ValidationError,
    *,
    names: Literal["flag", "env", "key"] = "key",
    env_prefix: str = "",
    where: str = "",
    flags: Mapping[str, str] | None = None,
) -> ConfigError:
    """pydantic's report as one :class:`ConfigError` line: the first bad value and why.

    ``names`` is how the user knows the field: ``flag`` (``--max-tokens``), ``env``
    (``env_prefix`` + ``MAX_TOKENS``, with the value that was given) or ``key``
    (``upstreams.0.url``, as written in a config file). ``where`` starts the line
    (e.g. ``gateway config gw.toml``). ``flags``: a field's flag where it is not
    ``--field-name`` (``engine_parallel``: ``--parallel``).
    """
    err = e.errors()[0]
    loc = [str(x) for x in err.get("loc", ())]
    msg = str(err.get("msg", "invalid value")).removeprefix("Value error, ")
    name = ""
    if loc and names == "flag":
        name = (flags or {}).get(loc[0]) or "--" + ".".join(loc).replace("_", "-")
    elif loc and names == "env":
        name = env_prefix + loc[0].upper()
    elif loc:
        name = ".".join(loc)
    if names == "env" and "input" in err:
        msg += f" (got {err['input']!r})"
    return ConfigError(": ".join(p for p in (where, name, msg) if p))
