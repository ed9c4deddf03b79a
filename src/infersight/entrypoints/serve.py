"""``infersight serve`` as functions: the embedded engine behind the gateway (the
default local stack), in the foreground until SIGINT/SIGTERM."""

from __future__ import annotations

import dataclasses
import signal
import sys
from typing import TYPE_CHECKING

from pydantic import AliasChoices, Field, ValidationError
from pydantic_settings import SettingsConfigDict

from infersight.client import resolve_api_key
from infersight.core.listen import check_can_listen
from infersight.core.settings import BaseConfig, config_error
from infersight.entrypoints.banner import startup_banner
from infersight.entrypoints.engine import (
    EngineOptions,
    describe,
    internal_key,
    new_engine,
    running_engine,
)
from infersight.entrypoints.gateway import engine_upstream, key_name
from infersight.gateway import KeyConfig, hash_key, load_config, serve

if TYPE_CHECKING:
    from infersight.engine import EmbeddedEngine
    from infersight.gateway.config import GatewayConfig
    from infersight.gateway.server import Gateway

__all__ = ["ServeSettings", "load_serve_settings", "resolve_key", "serve_engine"]

_LOOPBACK = {"127.0.0.1", "localhost", "::1"}


class ServeSettings(BaseConfig):
    """Defaults for ``infersight serve``; flags override them.

    Environment: ``INFERSIGHT_SERVE_PARALLEL``, ``_CTX``, ``_THREADS``, ``_HOST``,
    ``_PORT``, ``_MODEL``, and the public port's limits ``_MAX_BODY_BYTES``,
    ``_HEADER_TIMEOUT_S``, ``_BODY_TIMEOUT_S``, ``_KEEPALIVE_TIMEOUT_S``,
    ``_MAX_CONNECTIONS_PER_CLIENT``; the API key from ``INFERSIGHT_API_KEY`` or the
    file named by ``INFERSIGHT_API_KEY_FILE``.
    """

    model_config = SettingsConfigDict(env_prefix="INFERSIGHT_SERVE_", extra="ignore")

    model: str | None = None
    parallel: int = 8
    ctx: int | None = None
    threads: int | None = None
    host: str = "127.0.0.1"
    port: int = 8000
    api_key_file: str | None = Field(
        default=None, validation_alias=AliasChoices("INFERSIGHT_API_KEY_FILE")
    )
    #: Largest request body the public port accepts (413 above it).
    max_body_bytes: int = Field(default=8 * 1024 * 1024, ge=1024)
    #: Seconds for a whole request head, like nginx's client_header_timeout (then 408).
    header_timeout_s: float = Field(default=60.0, gt=0)
    #: Seconds without a body byte, like nginx's client_body_timeout (then 408).
    body_timeout_s: float = Field(default=60.0, gt=0)
    #: Seconds an idle kept-alive connection stays open.
    keepalive_timeout_s: float = Field(default=75.0, gt=0)
    #: Open connections per client address (0: no cap); more are refused with 429.
    max_connections_per_client: int = Field(default=512, ge=0)


def load_serve_settings() -> ServeSettings:
    """The environment's defaults; a bad value is one ConfigError line."""
    try:
        return ServeSettings()
    except ValidationError as e:
        raise config_error(e, names="env", env_prefix="INFERSIGHT_SERVE_") from None


def resolve_key(
    api_key_file: str | None, *, api_key_env: str | None = None
) -> tuple[str | None, str | None]:
    """(key, where it came from). The variable a flag names wins, then a file, then
    ``INFERSIGHT_API_KEY``."""
    if api_key_env:
        return resolve_api_key(env=api_key_env, required=True), f"${api_key_env}"
    if api_key_file:
        return resolve_api_key(file=api_key_file), f"file {api_key_file}"
    key = resolve_api_key(env="INFERSIGHT_API_KEY")
    return key, ("$INFERSIGHT_API_KEY" if key else None)


def _say(text: str, *, err: bool = False) -> None:
    print(text, file=sys.stderr if err else sys.stdout, flush=True)


def _banner(engine: EmbeddedEngine, key_source: str | None, url: str, private: str) -> str:
    c = engine.config
    size_mib = c.model.stat().st_size / 2**20
    return startup_banner(
        "serve",
        url,
        [
            ("model", f"{engine.model_name}  ({c.model}, {size_mib:.0f} MiB)"),
            (
                "slots",
                f"{c.parallel} x {c.ctx_per_slot} tokens of context (--ctx {c.ctx} in total)",
            ),
            ("threads", engine.thread_policy),
            ("api key", f"required, from {key_source}" if key_source else "none (open access)"),
            ("metrics", f"{url}/metrics"),
            ("engine", f"{engine.base_url} ({private})"),
        ],
    )


def _check_public(host: str, port: int, key: str | None) -> None:
    """Refuse an address that cannot be listened on before the model loads; warn about
    open access on a non-loopback address."""
    check_can_listen(host, port)
    if host not in _LOOPBACK and key is None:
        _say(
            f"warning: listening on {host} without an API key: anyone who can reach this "
            f"address can use the model (set INFERSIGHT_API_KEY)",
            err=True,
        )


def _key_label(key_source: str | None) -> str:
    """The name the key goes by in metrics, logs and ``/stats``, as the gateway names a
    key from the command line: its variable (``INFERSIGHT_API_KEY``), else ``file:NAME``."""
    if key_source and key_source.startswith("$"):
        return key_name(key_source[1:], None)
    if key_source and key_source.startswith("file "):
        return key_name(None, key_source.removeprefix("file "))
    return key_name(None, None)


def _gateway_config(
    engine: EmbeddedEngine, opts: EngineOptions, limits: ServeSettings, key_source: str | None
) -> GatewayConfig:
    """The gateway in front of ``engine``: the public address, the key and the limits
    of ``serve``, no access log (stdout carries the start-up lines)."""
    key = opts.api_key
    return load_config(
        None,
        host=opts.host,
        port=opts.port,
        upstreams=[engine_upstream(describe(engine, "serve"))],
        keys=[KeyConfig(name=_key_label(key_source), sha256=hash_key(key))] if key else [],
        require_key=bool(key),
        access_log=False,
        max_body_bytes=limits.max_body_bytes,
        client_header_timeout_s=limits.header_timeout_s,
        client_body_timeout_s=limits.body_timeout_s,
        keepalive_timeout_s=limits.keepalive_timeout_s,
        max_connections_per_client=limits.max_connections_per_client,
    )


def serve_engine(opts: EngineOptions, key_source: str | None, limits: ServeSettings) -> int:
    """The engine behind the gateway, which listens on ``opts.host:opts.port`` and
    checks ``opts.api_key``; the engine itself is private (loopback, a free port, an
    internal key only the gateway holds). Serve until SIGINT/SIGTERM (exit code 0), or
    until the engine dies (1)."""
    new_engine(opts)  # every setting checked as given (--port, --host...), one line each
    _check_public(opts.host, opts.port, opts.api_key)
    engine = new_engine(dataclasses.replace(opts, host="127.0.0.1", port=0, api_key=internal_key()))
    try:
        with running_engine(engine):
            cfg = _gateway_config(engine, opts, limits, key_source)

            def on_ready(gw: Gateway) -> None:
                note = "private: loopback, internal key, behind the gateway"
                _say(_banner(engine, key_source, gw.url, note))

            received = serve(cfg, on_ready, alive=lambda: engine.running)
            if received is None:
                code = engine.wait(0)
                tail = [ln for ln in engine.log_tail(20) if ln.strip()]
                why = f": {tail[-1].strip()}" if tail else ""
                _say(f"error: the engine process exited unexpectedly ({code}){why}", err=True)
                return 1
    except KeyboardInterrupt:  # during start-up: after it, signals only set `stop`
        _say("interrupted during start-up; engine stopped", err=True)
        return 130
    _say(f"stopped ({signal.Signals(received).name})", err=True)
    return 0
