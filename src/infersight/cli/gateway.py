"""`infersight gateway`: an OpenAI-compatible gateway with admission control and failover.

With no upstream the embedded engine is started and fronted, so plain
``infersight gateway`` is the default local stack (engine + gateway); the work is in
:mod:`infersight.entrypoints.gateway`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer

from infersight.core.endpoint import shown_url
from infersight.core.errors import ConfigError


def register(app: typer.Typer) -> None:
    """Add this module's commands to the app."""

    @app.command("gateway")
    def gateway(
        config: Path | None = typer.Option(None, "--config", "-c", help="TOML or YAML gateway config file."),
        upstream: list[str] = typer.Option([], "--upstream", "-u", help="NAME=URL[,models=a|b][,concurrency=N][,queue=N][,limiter=static|aimd|gradient][,key_env=VAR][,ttft=SECONDS]. Repeatable. None: start the embedded engine."),
        host: str | None = typer.Option(None, "--host", help="Bind address (default 127.0.0.1)."),
        port: int | None = typer.Option(None, "--port", "-p", help="Port (default 8090; 0 = a free port, printed)."),
        concurrency: int | None = typer.Option(None, "--concurrency", help="In-flight limit per upstream (start value if adaptive)."),
        queue: int | None = typer.Option(None, "--queue", help="Queue bound per upstream."),
        adaptive: bool = typer.Option(False, "--adaptive", help="Adaptive (gradient) concurrency limit for every upstream."),
        deadline: float | None = typer.Option(None, "--deadline", help="Default per-request deadline in seconds."),
        ttft_timeout: float | None = typer.Option(None, "--ttft-timeout", help="Fail over when an upstream sends no content within this many seconds."),
        prices: Path | None = typer.Option(None, "--prices", help="Price table TOML override."),
        no_access_log: bool = typer.Option(False, "--no-access-log", help="Do not print one JSON line per request."),
        example_config: bool = typer.Option(False, "--example-config", help="Print a commented example config file and exit."),
        hash_key: bool = typer.Option(False, "--hash-key", help="Read a gateway API key on stdin, print the sha256 to put in the config, exit."),
    ) -> None:
        """Run the gateway: OpenAI API in front of one or more upstreams.

        Endpoints: /v1/chat/completions, /v1/completions, /v1/embeddings, /v1/models,
        /metrics (Prometheus), /health, /stats. With no --upstream and no upstreams in
        the config, the embedded engine is started and fronted (the default local stack).
        Start from `infersight gateway --example-config > gateway.toml`.
        """
        if example_config:
            _print_example_config()
            return
        if hash_key:
            _print_key_hash()
            return
        from infersight.entrypoints.gateway import gateway_config, run_gateway

        cfg = gateway_config(
            config, upstream, host=host, port=port, concurrency=concurrency, queue=queue,
            adaptive=adaptive, deadline=deadline, ttft_timeout=ttft_timeout, prices=prices,
            no_access_log=no_access_log,
        )  # fmt: skip

        def starting() -> None:
            typer.echo("no upstream given: starting the embedded engine...", err=True)

        def ready(gw: Any) -> None:
            # stderr: stdout carries only the JSON access lines.
            names = ", ".join(f"{u.name}={shown_url(u.cfg.url)}" for u in gw.upstreams)
            typer.echo(f"infersight gateway listening on {gw.url}  (upstreams: {names})",
                       err=True)
            sys.stderr.flush()

        run_gateway(cfg, on_ready=ready, on_start=starting)


def _print_example_config() -> None:
    from importlib import resources

    text = resources.files("infersight.data").joinpath("gateway/example.toml")
    typer.echo(text.read_text(), nl=False)


def _print_key_hash() -> None:
    from infersight.gateway.config import hash_key

    key = sys.stdin.readline().strip()
    if not key:
        raise ConfigError("--hash-key: give the key on stdin (echo -n KEY | ...)")
    typer.echo(hash_key(key))
