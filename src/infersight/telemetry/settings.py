"""Telemetry settings from the environment (``INFERSIGHT_TELEMETRY_*``); CLI flags
override them."""

from __future__ import annotations

from pydantic import Field, ValidationError
from pydantic_settings import SettingsConfigDict

from infersight.core.settings import BaseConfig, config_error

__all__ = ["TelemetrySettings", "load_settings"]


class TelemetrySettings(BaseConfig):
    """``INFERSIGHT_TELEMETRY_INTERVAL``, ``_GPU``, ``_SCRAPE_TIMEOUT``,
    ``_EXPORTER_HOST``, ``_EXPORTER_PORT``, ``_URLS`` (comma-separated defaults for
    monitor/exporter when no URL is given)."""

    model_config = SettingsConfigDict(env_prefix="INFERSIGHT_TELEMETRY_", extra="ignore")

    interval: float = Field(default=1.0, gt=0.0, le=3600.0)
    gpu: bool = True
    scrape_timeout: float = Field(default=2.0, gt=0.0, le=60.0)
    exporter_host: str = "127.0.0.1"
    exporter_port: int = Field(default=9400, ge=0, le=65535)
    urls: str = "http://127.0.0.1:8000,http://127.0.0.1:8090"

    def default_urls(self) -> list[str]:
        return [u.strip() for u in self.urls.split(",") if u.strip()]


def load_settings() -> TelemetrySettings:
    """Read the environment; a bad value is a one-line ConfigError."""
    try:
        return TelemetrySettings()
    except ValidationError as e:
        raise config_error(e, names="env", env_prefix="INFERSIGHT_TELEMETRY_") from None
