"""Configuration shared by the CLI and the environment (prefix ``INFERSIGHT_``).

Each feature package defines its own settings class deriving from :class:`BaseConfig`
with a longer prefix (``INFERSIGHT_GATEWAY_``, ``INFERSIGHT_BENCH_``...). CLI flags
override the environment; the environment overrides defaults.
"""

from __future__ import annotations

from typing import Self

from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["BaseConfig", "Settings"]


class BaseConfig(BaseSettings):
    """Base for every settings class: env prefix ``INFERSIGHT_``, unknown keys ignored."""

    model_config = SettingsConfigDict(env_prefix="INFERSIGHT_", extra="ignore")

    @classmethod
    def from_env(cls) -> Self:
        """The settings from the environment; a bad value is one ConfigError line that
        names its variable."""
        from pydantic import ValidationError

        from infersight.core.errors import ConfigError

        try:
            return cls()
        except ValidationError as e:
            err = e.errors()[0]
            prefix = str(cls.model_config.get("env_prefix", ""))
            name = prefix + str(err["loc"][0]).upper() if err["loc"] else "environment"
            raise ConfigError(f"{name}: {err['msg']} (got {err.get('input')!r})") from None


class Settings(BaseConfig):
    """Settings every command shares."""

    #: API key for the embedded engine/gateway, or for the target of a client.
    api_key: str | None = None
    #: File holding the API key (first line); used when ``api_key`` is unset.
    api_key_file: str | None = None
    #: Default bind host for every server infersight starts.
    host: str = "127.0.0.1"
    log_level: str = "WARNING"
