"""`infersight serve`: the embedded llama.cpp engine as an OpenAI-compatible server."""

from __future__ import annotations

from pathlib import Path

import typer

from infersight.cli._conventions import (
    api_key_env_option,
    api_key_file_option,
    command_help,
    port_option,
)
from infersight.engine.threads import SPIN_COUNT

# In the command, not here: entrypoints adds ~1.8 s to `infersight --help`.

__all__ = ["register", "serve"]

_HELP = command_help(
    "Serve a GGUF model with llama.cpp on an OpenAI-compatible API.",
    "Endpoints: /v1/chat/completions, /v1/completions, /v1/models, /health, /metrics "
    "(Prometheus), /tokenize, /detokenize, /slots, /props. The infersight gateway serves "
    "--host/--port (admission control, metrics, cost): bad input gets a 4xx with an "
    "OpenAI error body, a body over 8 MiB a 413 (INFERSIGHT_SERVE_MAX_BODY_BYTES), a "
    "stalled request head or body a 408 after 60 s; the engine listens privately behind "
    "it, on a loopback port with a random internal key. Settings also come from "
    "INFERSIGHT_SERVE_* variables.",
    "Threads: llama.cpp's compute threads meet at a barrier after every operation, "
    "hundreds of times per token. By default a waiting thread spins a short, bounded "
    f"while (GOMP_SPINCOUNT={SPIN_COUNT} turns, a fraction of a millisecond) and then "
    "sleeps. On an idle machine that is as fast as llama-server's defaults; when another "
    "process takes a core, the waiting thread gives its core back at once instead of "
    "spinning through the time slice its peer needs (llama-server's default spin, "
    "300,000 turns, collapses there). OMP_WAIT_POLICY=ACTIVE (always spin) or PASSIVE "
    "(always sleep) and GOMP_SPINCOUNT in the environment override it; the start-up "
    "lines show the choice. Figures: benchmarks/engine_scaling.py --raw --busy.",
    examples=[
        "infersight serve",
        "infersight serve --model ./qwen2.5-0.5b-q4_k_m.gguf --parallel 16",
        "infersight serve --api-key-env MY_KEY --host 0.0.0.0",
    ],
)


def serve(
    model: Path | None = typer.Option(
        None,
        "--model",
        metavar="FILE",
        help="GGUF model file.",
        show_default="SmolLM2-135M-Instruct Q4_1",
    ),
    parallel: int | None = typer.Option(
        None, "--parallel", help="Slots: requests decoded together.", show_default="8"
    ),
    ctx: int | None = typer.Option(
        None,
        "--ctx",
        help="Total context in tokens, shared by the slots.",
        show_default="2048 x slots",
    ),
    threads: int | None = typer.Option(
        None,
        "--threads",
        help=(
            "CPU threads for llama.cpp's compute (decode and prompt); waiting threads spin "
            "briefly, then sleep (see above)."
        ),
        show_default="the physical cores this process may use",
    ),
    host: str | None = typer.Option(
        None, "--host", help="Address to listen on.", show_default="127.0.0.1"
    ),
    port: int | None = port_option(
        None, help="Port to listen on; 0 picks a free one and prints it.", show_default="8000"
    ),
    api_key_env: str | None = api_key_env_option(
        "Environment variable holding the API key clients must send. Without a key, access is open."
    ),
    api_key_file: Path | None = api_key_file_option(
        "File whose first line is the API key clients must send (or set INFERSIGHT_API_KEY)."
    ),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Show llama.cpp's log."),
    gateway: bool = typer.Option(
        False,
        "--gateway",
        hidden=True,
        help="Kept for scripts: serve always runs the gateway in front of the engine.",
    ),
) -> None:
    from infersight.entrypoints.engine import EngineOptions
    from infersight.entrypoints.serve import load_serve_settings, resolve_key, serve_engine

    env = load_serve_settings()
    key, key_source = resolve_key(
        str(api_key_file) if api_key_file else env.api_key_file, api_key_env=api_key_env
    )
    public_host = host or env.host
    public_port = port if port is not None else env.port
    opts = EngineOptions(
        model=model or env.model,
        parallel=parallel if parallel is not None else env.parallel,
        ctx=ctx if ctx is not None else env.ctx,
        threads=threads if threads is not None else env.threads,
        # The public address and key; the engine itself always listens privately.
        host=public_host,
        port=public_port,
        api_key=key,
        verbose=verbose,
    )
    del gateway  # the default since serve runs behind the gateway
    code = serve_engine(opts, key_source, env)
    if code:
        raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    """Add ``infersight serve`` to the app."""
    app.command("serve", help=_HELP)(serve)
