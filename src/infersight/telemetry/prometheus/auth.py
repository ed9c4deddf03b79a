"""How to authenticate to Prometheus and trust its TLS certificate.

The options are Prometheus' own HTTP client options (``promtool
--http.config.file``, the ``http_config`` of a scrape job or of Grafana's data source):

.. code-block:: yaml

    basic_auth: {username: sre, password_file: /run/secrets/prom-password}
    authorization: {type: Bearer, credentials_file: /run/secrets/prom-token}
    tls_config:
      ca_file: /etc/ssl/prom-ca.pem
      cert_file: client.pem          # client certificate (mutual TLS)
      key_file: client-key.pem
      server_name: prometheus.internal
      insecure_skip_verify: false

The same options come from the environment (``INFERSIGHT_PROMETHEUS_BEARER_TOKEN`` or
``_BEARER_TOKEN_FILE``, ``_USERNAME`` with ``_PASSWORD`` or ``_PASSWORD_FILE``,
``_CA_FILE``, ``_CERT_FILE``, ``_KEY_FILE``, ``_SERVER_NAME``,
``_INSECURE_SKIP_VERIFY``); a file given with ``--http-config`` wins. Secrets are read
from files or the environment only and never appear in messages.
"""

from __future__ import annotations

import base64
import contextlib
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, Field, SecretStr, ValidationError
from pydantic_settings import SettingsConfigDict

from infersight.core.errors import ConfigError, read_user_file
from infersight.core.settings import BaseConfig, config_error

__all__ = ["PrometheusAuth", "PrometheusEnv", "load_auth"]

_SUPPORTED = {
    "basic_auth",
    "authorization",
    "bearer_token",
    "bearer_token_file",
    "tls_config",
    "follow_redirects",
    "enable_http2",
}


class PrometheusAuth(BaseModel):
    """Credentials and TLS trust for one Prometheus server."""

    username: str = ""
    password_value: SecretStr = Field(default=SecretStr(""), repr=False)
    bearer: SecretStr = Field(default=SecretStr(""), repr=False)
    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None
    server_name: str = ""
    insecure_skip_verify: bool = False

    def headers(self) -> dict[str, str]:
        """The ``Authorization`` header, if any (a bearer token wins over basic auth)."""
        token = self.bearer.get_secret_value()
        if token:
            return {"Authorization": f"Bearer {token}"}
        if self.username:
            pair = f"{self.username}:{self.password_value.get_secret_value()}".encode()
            return {"Authorization": "Basic " + base64.b64encode(pair).decode()}
        return {}

    def ssl_context(self) -> ssl.SSLContext:
        """A client TLS context: the system CAs or ``ca_file``, the client certificate."""
        with _tls_file(f"tls_config.ca_file {self.ca_file}: not a readable PEM CA"):
            ctx = ssl.create_default_context(cafile=str(self.ca_file) if self.ca_file else None)
        if self.cert_file:
            key = str(self.key_file) if self.key_file else None
            with _tls_file(
                f"tls_config.cert_file {self.cert_file}: cannot load the client certificate and key"
            ):
                ctx.load_cert_chain(str(self.cert_file), key)
        if self.insecure_skip_verify:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        return ctx


@contextlib.contextmanager
def _tls_file(what: str) -> Iterator[None]:
    """A TLS file that cannot be read or loaded: a ConfigError that says which and why."""
    try:
        yield
    except (OSError, ssl.SSLError) as e:
        raise ConfigError(f"{what} ({getattr(e, 'strerror', None) or type(e).__name__})") from None


class PrometheusEnv(BaseConfig):
    """``INFERSIGHT_PROMETHEUS_*``: the same options as an ``--http-config`` file."""

    model_config = SettingsConfigDict(env_prefix="INFERSIGHT_PROMETHEUS_", extra="ignore")

    bearer_token: SecretStr = SecretStr("")
    bearer_token_file: Path | None = None
    username: str = ""
    password: SecretStr = SecretStr("")
    password_file: Path | None = None
    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None
    server_name: str = ""
    insecure_skip_verify: bool = False


def _secret_file(path: Any, what: str) -> str:
    p = Path(str(path)).expanduser()
    value = read_user_file(p, what).decode().strip()
    if not value:
        raise ConfigError(f"{what} {p} is empty")
    return value


def _from_env() -> PrometheusAuth:
    try:
        env = PrometheusEnv()
    except ValidationError as e:
        raise config_error(e, names="env", env_prefix="INFERSIGHT_PROMETHEUS_") from None
    token = env.bearer_token.get_secret_value().strip()
    if not token and env.bearer_token_file:
        token = _secret_file(env.bearer_token_file, "INFERSIGHT_PROMETHEUS_BEARER_TOKEN_FILE")
    password = env.password.get_secret_value()
    if not password and env.password_file:
        password = _secret_file(env.password_file, "INFERSIGHT_PROMETHEUS_PASSWORD_FILE")
    return PrometheusAuth(
        username=env.username,
        password_value=SecretStr(password),
        bearer=SecretStr(token),
        ca_file=env.ca_file,
        cert_file=env.cert_file,
        key_file=env.key_file,
        server_name=env.server_name,
        insecure_skip_verify=env.insecure_skip_verify,
    )


def _section(doc: dict[str, Any], key: str, path: Path) -> dict[str, Any]:
    sec = doc.get(key) or {}
    if not isinstance(sec, dict):
        raise ConfigError(f"--http-config {path}: {key} must be a mapping")
    return sec


def _from_file(path: Path) -> PrometheusAuth:
    text = read_user_file(path, "--http-config").decode()
    try:
        doc = yaml.safe_load(text) or {}
    except yaml.YAMLError as e:
        raise ConfigError(f"--http-config {path}: not valid YAML ({type(e).__name__})") from None
    if not isinstance(doc, dict):
        raise ConfigError(
            f"--http-config {path}: expected a mapping of Prometheus http_config keys"
        )
    unknown = sorted(set(doc) - _SUPPORTED)
    if unknown:
        raise ConfigError(
            f"--http-config {path}: {', '.join(unknown)} not supported (supported: "
            "basic_auth, authorization, bearer_token_file, tls_config)"
        )
    base = path.parent

    def rel(v: Any) -> Path | None:  # paths relative to the file, as Prometheus reads them
        return (base / Path(str(v)).expanduser()) if v else None

    basic = _section(doc, "basic_auth", path)
    authz = _section(doc, "authorization", path)
    tls = _section(doc, "tls_config", path)
    password = str(basic.get("password") or "")
    if not password and basic.get("password_file"):
        password = _secret_file(rel(basic["password_file"]), "basic_auth.password_file")
    token = str(authz.get("credentials") or doc.get("bearer_token") or "")
    token_file = authz.get("credentials_file") or doc.get("bearer_token_file")
    if not token and token_file:
        token = _secret_file(rel(token_file), "authorization.credentials_file")
    if authz and str(authz.get("type", "Bearer")).lower() != "bearer":
        raise ConfigError(
            f"--http-config {path}: authorization.type {authz.get('type')!r} not "
            "supported (Bearer only)"
        )
    return PrometheusAuth(
        username=str(basic.get("username") or ""),
        password_value=SecretStr(password),
        bearer=SecretStr(token),
        ca_file=rel(tls.get("ca_file")),
        cert_file=rel(tls.get("cert_file")),
        key_file=rel(tls.get("key_file")),
        server_name=str(tls.get("server_name") or ""),
        insecure_skip_verify=bool(tls.get("insecure_skip_verify", False)),
    )


def load_auth(http_config: Path | str | None = None) -> PrometheusAuth:
    """Credentials and TLS options: ``http_config`` (Prometheus' file format) when
    given, else the ``INFERSIGHT_PROMETHEUS_*`` environment."""
    if http_config:
        return _from_file(Path(http_config).expanduser())
    return _from_env()
