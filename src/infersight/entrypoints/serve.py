"""``infersight serve`` as functions: the embedded engine in the foreground, alone or
behind the gateway (the default local stack), until SIGINT/SIGTERM."""

from __future__ import annotations

import signal
import sys
import threading
from typing import TYPE_CHECKING

from pydantic import AliasChoices, Field
from pydantic_settings import SettingsConfigDict

from infersight.core.listen import check_can_listen
from infersight.core.settings import BaseConfig, config_error
from infersight.entrypoints.engine import EngineOptions, describe, new_engine, running_engine

if TYPE_CHECKING:
    from infersight.engine import EmbeddedEngine
    from infersight.gateway.server import Gateway

__all__ = ["ServeSettings", "load_serve_settings", "resolve_key", "serve_engine", "serve_stack"]

_LOOPBACK = {"127.0.0.1", "localhost", "::1"}


class ServeSettings(BaseConfig):
    """Defaults for ``infersight serve``; flags override them.

    Environment: ``INFERSIGHT_SERVE_PARALLEL``, ``_CTX``, ``_THREADS``, ``_HOST``,
    ``_PORT``, ``_MODEL``; the API key from ``INFERSIGHT_API_KEY`` or the file named by
    ``INFERSIGHT_API_KEY_FILE``.
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


def load_serve_settings() -> ServeSettings:
    """The environment's defaults; a bad value is one ConfigError line."""
    from pydantic import ValidationError

    try:
        return ServeSettings()
    except ValidationError as e:
        raise config_error(e, names="env", env_prefix="INFERSIGHT_SERVE_") from None


def resolve_key(
    api_key_file: str | None, *, api_key_env: str | None = None
) -> tuple[str | None, str | None]:
    """(key, where it came from). The variable a flag names wins, then a file, then
    ``INFERSIGHT_API_KEY``."""
    from infersight.client import resolve_api_key

    if api_key_env:
        return resolve_api_key(env=api_key_env, required=True), f"${api_key_env}"
    if api_key_file:
        return resolve_api_key(file=api_key_file), f"file {api_key_file}"
    key = resolve_api_key(env="INFERSIGHT_API_KEY")
    return key, ("$INFERSIGHT_API_KEY" if key else None)


def _say(text: str, *, err: bool = False) -> None:
    print(text, file=sys.stderr if err else sys.stdout, flush=True)


def _banner(engine: EmbeddedEngine, key_source: str | None) -> str:
    c = engine.config
    size_mib = c.model.stat().st_size / 2**20
    lines = [
        f"infersight serve: listening on {engine.base_url}  (OpenAI API: {engine.base_url}/v1)",
        f"  model    {engine.model_name}  ({c.model}, {size_mib:.0f} MiB)",
        f"  slots    {c.parallel} x {c.ctx_per_slot} tokens of context (--ctx {c.ctx} in total)",
        f"  threads  {engine.thread_policy}",
        f"  api key  {'required, from ' + key_source if key_source else 'none (open access)'}",
        f"  metrics  {engine.base_url}/metrics",
        "Press Ctrl-C to stop.",
    ]
    return "\n".join(lines)


def serve_engine(opts: EngineOptions, key_source: str | None) -> int:
    """Serve until SIGINT/SIGTERM (exit code 0), or until the engine dies (1)."""
    engine = new_engine(opts)
    if engine.config.host not in _LOOPBACK and opts.api_key is None:
        _say(
            f"warning: listening on {engine.config.host} without an API key: anyone who "
            f"can reach this address can use the model (set INFERSIGHT_API_KEY)",
            err=True,
        )
    try:
        with running_engine(engine):
            code, received = _watch(engine, key_source)
    except KeyboardInterrupt:  # during start-up: after it, signals only set `stop`
        _say("interrupted during start-up; engine stopped", err=True)
        return 130
    if received:
        _say(f"stopped ({signal.Signals(received[0]).name})", err=True)
    return code


def _watch(engine: EmbeddedEngine, key_source: str | None) -> tuple[int, list[int]]:
    """Print the banner, then wait for a signal or the engine's death."""
    stop = threading.Event()
    received: list[int] = []

    def on_signal(signum: int, frame: object) -> None:
        received.append(signum)
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    _say(_banner(engine, key_source))
    while not stop.wait(0.5):
        if not engine.running:
            code = engine.wait(0)
            tail = [ln for ln in engine.log_tail(20) if ln.strip()]
            why = f": {tail[-1].strip()}" if tail else ""
            _say(f"error: the engine process exited unexpectedly ({code}){why}", err=True)
            return 1, received
    return 0, received


def serve_stack(
    opts: EngineOptions, host: str, port: int, key: str | None, key_source: str | None
) -> None:
    """The engine (``opts``: private, loopback, no key) and the gateway in front of it
    on ``host:port``, checking ``key``; until SIGINT/SIGTERM."""
    from infersight.entrypoints.gateway import engine_upstream
    from infersight.gateway import KeyConfig, hash_key, load_config, serve

    if host not in _LOOPBACK and key is None:
        _say(f"warning: listening on {host} without an API key (set INFERSIGHT_API_KEY)",
             err=True)  # fmt: skip
    check_can_listen(host, port)  # a taken port: one line, before the engine starts
    engine = new_engine(opts)
    with running_engine(engine):
        keys = [KeyConfig(name="default", sha256=hash_key(key))] if key else []
        cfg = load_config(
            None, host=host, port=port, upstreams=[engine_upstream(describe(engine, "serve"))],
            keys=keys, require_key=bool(key),
        )  # fmt: skip

        def on_ready(gw: Gateway) -> None:
            lines = _banner(engine, key_source).replace(engine.base_url, gw.url).splitlines()
            lines.insert(-1, f"  engine   {engine.base_url} (private, behind the gateway)")
            _say("\n".join(lines))

        serve(cfg, on_ready)
