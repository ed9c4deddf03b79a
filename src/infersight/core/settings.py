"""Configuration shared by the CLI and the environment (prefix ``INFERSIGHT_``).

Each feature package defines its own settings class deriving from :class:`BaseConfig`
with a longer prefix (``INFERSIGHT_GATEWAY_``, ``INFERSIGHT_BENCH_``...). CLI flags
override the environment; the environment overrides defaults.
"""

from __future__ import annotations

from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["BaseConfig", "Settings"]


class BaseConfig(BaseSettings):
    """Base for every settings class: env prefix ``INFERSIGHT_``, unknown keys ignored."""

    model_config = SettingsConfigDict(env_prefix="INFERSIGHT_", extra="ignore")


class Settings(BaseConfig):
    """Settings every command shares."""

    #: API key for the embedded engine/gateway, or for the target of a client.
    api_key: str | None = None
    #: File holding the API key (first line); used when ``api_key`` is unset.
    api_key_file: str | None = None
    #: Default bind host for every server infersight starts.
    host: str = "127.0.0.1"
    log_level: str = "WARNING"
