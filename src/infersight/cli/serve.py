"""`infersight serve`: the embedded llama.cpp engine as an OpenAI-compatible server."""

from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path
from typing import Any

import typer
from pydantic import AliasChoices, Field
from pydantic_settings import SettingsConfigDict

from infersight.core.settings import BaseConfig, config_error

__all__ = ["ServeSettings", "register"]

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


def _settings() -> ServeSettings:
    from pydantic import ValidationError

    try:
        return ServeSettings()
    except ValidationError as e:
        raise config_error(e, names="env", env_prefix="INFERSIGHT_SERVE_") from None


def _api_key(api_key_file: str | None) -> tuple[str | None, str | None]:
    """(key, where it came from). A flag's file wins over the environment."""
    from infersight.client import resolve_api_key

    if api_key_file:
        return resolve_api_key(file=api_key_file), f"file {api_key_file}"
    key = resolve_api_key(env="INFERSIGHT_API_KEY")
    return key, ("$INFERSIGHT_API_KEY" if key else None)


def _banner(engine: Any, key_source: str | None) -> str:
    c = engine.config
    size_mib = c.model.stat().st_size / 2**20
    lines = [
        f"infersight serve: listening on {engine.base_url}  (OpenAI API: {engine.base_url}/v1)",
        f"  model    {engine.model_name}  ({c.model}, {size_mib:.0f} MiB)",
        f"  slots    {c.parallel} x {c.ctx_per_slot} tokens of context (--ctx {c.ctx} in total)",
        f"  threads  {c.threads}",
        f"  api key  {'required, from ' + key_source if key_source else 'none (open access)'}",
        f"  metrics  {engine.base_url}/metrics",
        "Press Ctrl-C to stop.",
    ]
    return "\n".join(lines)


def serve(
    model: Path | None = typer.Option(
        None, "--model", help="GGUF model file. Default: SmolLM2-135M-Instruct Q4_1."
    ),
    parallel: int | None = typer.Option(
        None, "--parallel", help="Slots: requests decoded together. (default: 8)"
    ),
    ctx: int | None = typer.Option(
        None, "--ctx", help="Total context in tokens, shared by the slots. (default: 2048 x slots)"
    ),
    threads: int | None = typer.Option(
        None, "--threads", help="CPU threads. (default: physical cores)"
    ),
    host: str | None = typer.Option(None, "--host", help="Bind address. (default: 127.0.0.1)"),
    port: int | None = typer.Option(
        None, "--port", help="Port; 0 picks a free one and prints it. (default: 8000)"
    ),
    api_key_file: Path | None = typer.Option(
        None,
        "--api-key-file",
        help="File whose first line is the API key clients must send "
        "(or set INFERSIGHT_API_KEY). Without one, access is open.",
    ),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Show llama.cpp's log."),
    gateway: bool = typer.Option(
        False,
        "--gateway",
        help="Run the default local stack: the engine on a private loopback port and the "
        "infersight gateway (admission control, metrics, cost) on --host/--port in front.",
    ),
) -> None:
    """Serve a GGUF model with llama.cpp on an OpenAI-compatible API.

    Endpoints: /v1/chat/completions, /v1/completions, /v1/models, /health,
    /metrics (Prometheus), /tokenize, /slots.
    """
    from infersight.engine import EmbeddedEngine

    env = _settings()
    key, key_source = _api_key(str(api_key_file) if api_key_file else env.api_key_file)
    public_host = host or env.host
    public_port = port if port is not None else env.port
    engine = EmbeddedEngine(
        model=model or env.model,
        parallel=parallel if parallel is not None else env.parallel,
        ctx=ctx if ctx is not None else env.ctx,
        threads=threads if threads is not None else env.threads,
        # Behind the gateway the engine is private: loopback, free port, no key (the
        # gateway checks the key instead).
        host="127.0.0.1" if gateway else public_host,
        port=0 if gateway else public_port,
        api_key=None if gateway else key,
        verbose=verbose,
    )
    if gateway:
        _serve_with_gateway(engine, public_host, public_port, key, key_source)
        return
    if engine.config.host not in _LOOPBACK and key is None:
        typer.echo(
            f"warning: listening on {engine.config.host} without an API key: anyone who "
            f"can reach this address can use the model (set INFERSIGHT_API_KEY)",
            err=True,
        )

    stop = threading.Event()
    received: list[int] = []

    def _on_signal(signum: int, frame: object) -> None:
        received.append(signum)
        stop.set()

    # During start-up Ctrl-C interrupts the wait (start() stops the child on the way
    # out); SIGTERM does the same.
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        engine.start()
    except KeyboardInterrupt:
        typer.echo("interrupted during start-up; engine stopped", err=True)
        raise typer.Exit(130) from None
    finally:
        signal.signal(signal.SIGTERM, previous)

    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)
    typer.echo(_banner(engine, key_source))
    sys.stdout.flush()
    exit_code = 0
    try:
        while not stop.wait(0.5):
            if not engine.running:
                code = engine.wait(0)
                tail = [ln for ln in engine.log_tail(20) if ln.strip()]
                why = f": {tail[-1].strip()}" if tail else ""
                typer.echo(f"error: the engine process exited unexpectedly ({code}){why}", err=True)
                exit_code = 1
                break
    finally:
        engine.stop()
    if received:
        typer.echo(f"stopped ({signal.Signals(received[0]).name})", err=True)
    if exit_code:
        raise typer.Exit(exit_code)


def _serve_with_gateway(
    engine: Any, host: str, port: int, key: str | None, key_source: str | None
) -> None:
    """Engine + gateway in front of it, until SIGINT/SIGTERM."""
    from infersight.gateway import KeyConfig, UpstreamConfig, hash_key, load_config
    from infersight.gateway import serve as serve_gateway

    if host not in _LOOPBACK and key is None:
        typer.echo(
            f"warning: listening on {host} without an API key (set INFERSIGHT_API_KEY)",
            err=True,
        )
    with engine:
        slots = engine.config.parallel
        upstream = UpstreamConfig(
            name="engine",
            url=engine.base_url,
            models=[engine.model_name],
            concurrency=slots,
            max_concurrency=max(slots * 4, 8),
            queue=slots * 8,
        )
        keys = [KeyConfig(name="default", sha256=hash_key(key))] if key else []
        cfg = load_config(
            None, host=host, port=port, upstreams=[upstream], keys=keys, require_key=bool(key)
        )

        def on_ready(gw: Any) -> None:
            lines = _banner(engine, key_source).replace(engine.base_url, gw.url).splitlines()
            lines.insert(-1, f"  engine   {engine.base_url} (private, behind the gateway)")
            typer.echo("\n".join(lines))
            sys.stdout.flush()

        serve_gateway(cfg, on_ready)


def register(app: typer.Typer) -> None:
    """Add ``infersight serve`` to the app."""
    app.command("serve")(serve)
