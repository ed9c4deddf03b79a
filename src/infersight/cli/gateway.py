"""`infersight gateway`: an OpenAI-compatible gateway with admission control and failover.

With no upstream the embedded engine is started and fronted, so plain
``infersight gateway`` is the default local stack (engine + gateway); the work is in
:mod:`infersight.entrypoints.gateway`.
"""

from __future__ import annotations

import sys
from importlib import resources
from pathlib import Path
from typing import Any

import typer

from infersight.cli._conventions import (
    api_key_env_option,
    api_key_file_option,
    command_help,
    duration_option,
    port_option,
)
from infersight.core.errors import ConfigError

# In the commands, not here: entrypoints (~1.8 s), client (~0.2 s), gateway (~0.25 s).

_HELP = command_help(
    "OpenAI API gateway: admission control, failover, cost.",
    "One OpenAI-compatible endpoint in front of one or more upstreams.",
    "Endpoints: /v1/chat/completions, /v1/completions, /v1/embeddings, /v1/models, "
    "/metrics (Prometheus), /health, /stats. With no --upstream and no upstreams in the "
    "config, the embedded engine is started and fronted (the default local stack). "
    "--config also reads a LiteLLM proxy config (model_list, router_settings, "
    "litellm_settings). Start from `infersight gateway --example-config`.",
    examples=[
        "infersight gateway",
        "infersight gateway -u a=http://10.0.0.5:8000 -u b=http://10.0.0.6:8000",
        "infersight gateway --config litellm.yaml --port 4000",
        "infersight gateway --example-config > gateway.toml",
        'echo -n "$KEY" | infersight gateway --hash-key',
    ],
)


def register(app: typer.Typer) -> None:
    """Add this module's commands to the app."""

    @app.command("gateway", help=_HELP)
    def gateway(
        config: Path | None = typer.Option(
            None,
            "--config",
            "-c",
            metavar="FILE",
            help="Gateway config file: TOML or YAML, or a LiteLLM proxy config.",
        ),
        upstream: list[str] = typer.Option(
            [],
            "--upstream",
            "-u",
            metavar="SPEC",
            help=(
                "An upstream: NAME=URL, then optional ,key=value settings: models=a|b, "
                "concurrency=N, queue=N, limiter=static|aimd|gradient, key_env=VAR, "
                "key_file=PATH, ttft=DURATION. Repeatable; with none, the embedded engine is "
                "started."
            ),
            show_default=False,
        ),
        host: str | None = typer.Option(
            None, "--host", help="Address to listen on.", show_default="127.0.0.1"
        ),
        port: int | None = port_option(
            None, help="Port to listen on; 0 picks a free one (printed).", show_default="8090"
        ),
        max_concurrency: int | None = typer.Option(
            None,
            "--max-concurrency",
            help=(
                "At most this many requests in flight per upstream (the start value when "
                "adaptive); with no upstream, also the embedded engine's slots."
            ),
        ),
        queue: int | None = typer.Option(
            None, "--queue", help="Requests that may wait per upstream once it is at its limit."
        ),
        adaptive: bool = typer.Option(
            False, "--adaptive", help="Adaptive concurrency limit for every upstream."
        ),
        deadline: float | None = duration_option(
            None,
            "--deadline",
            help="The deadline of a request, across queueing, retries and failover.",
            show_default="5m",
        ),
        ttft_timeout: float | None = duration_option(
            None,
            "--ttft-timeout",
            help="Fail over when an upstream sends no content within this long.",
        ),
        prices: Path | None = typer.Option(
            None, "--prices", metavar="FILE", help="Price table TOML override."
        ),
        api_key_env: str | None = api_key_env_option(
            "Environment variable holding the API key clients must send (adds it to the config's "
            "keys)."
        ),
        api_key_file: Path | None = api_key_file_option(
            "File holding the API key clients must send (its first line)."
        ),
        no_access_log: bool = typer.Option(
            False, "--no-access-log", help="Do not print one JSON line per request."
        ),
        example_config: bool = typer.Option(
            False, "--example-config", help="Print a commented example config file and exit."
        ),
        hash_key: bool = typer.Option(
            False,
            "--hash-key",
            help="Read a gateway API key on stdin, print the sha256 to put in the config, exit.",
        ),
    ) -> None:
        if example_config:
            _print_example_config()
            return
        if hash_key:
            _print_key_hash()
            return
        from infersight.entrypoints.gateway import gateway_config, key_name, run_gateway

        cfg = gateway_config(
            config,
            upstream,
            host=host,
            port=port,
            concurrency=max_concurrency,
            queue=queue,
            adaptive=adaptive,
            deadline=deadline,
            ttft_timeout=ttft_timeout,
            prices=prices,
            no_access_log=no_access_log,
            client_key=client_key(api_key_env, api_key_file),
            client_key_name=key_name(api_key_env, api_key_file),
        )

        def starting() -> None:
            typer.echo("no upstream given: starting the embedded engine...", err=True)

        def ready(gw: Any) -> None:
            from infersight.entrypoints.banner import gateway_banner

            # stderr: stdout carries only the JSON access lines.
            typer.echo(gateway_banner(gw), err=True)
            sys.stderr.flush()

        run_gateway(cfg, on_ready=ready, on_start=starting)


def client_key(env: str | None, file: Path | None) -> str | None:
    """The key clients must send, from ``--api-key-env`` / ``--api-key-file``."""
    if not env and not file:
        return None
    from infersight.client import resolve_api_key

    return resolve_api_key(env=env, file=str(file) if file else None, required=True)


def _print_example_config() -> None:
    text = resources.files("infersight.data").joinpath("gateway/example.toml")
    typer.echo(text.read_text(), nl=False)


def _print_key_hash() -> None:
    from infersight.gateway.config import hash_key

    key = sys.stdin.readline().strip()
    if not key:
        raise ConfigError("--hash-key: give the key on stdin (echo -n KEY | ...)")
    typer.echo(hash_key(key))
