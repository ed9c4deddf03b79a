"""`infersight bench`: measure a server from one request to saturation."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:
    from infersight.bench import BenchConfig

_HELP = """Load-test an OpenAI-compatible server and explain the result.

With no --url the embedded engine is started for the run. Latency counts from the intended send time (no coordinated omission); a run the load generator itself limited is flagged at the top of every output.

Examples:

  infersight bench --concurrency 1,4,16 --requests 48 --max-tokens 64 --out runs/demo

  infersight bench --url http://127.0.0.1:8000 --rate 1,2,4 --duration 60

  infersight bench --url URL --find-max --slo "ttft_p99<500ms,tpot_p99<50ms"

  infersight bench --url URL --rate 200 --duration 60 --ray auto --workers 4
"""


def register(app: typer.Typer) -> None:
    """Add ``bench`` to the app."""

    @app.command("bench", help=_HELP, no_args_is_help=False)
    def bench(
        url: str = typer.Option(None, help="Server root, e.g. http://127.0.0.1:8000 (default: start the embedded engine)."),
        model: str = typer.Option(None, help="Model id (default: the first the server lists)."),
        api_key_env: str = typer.Option(None, help="Environment variable holding the API key."),
        api_key_file: Path = typer.Option(None, help="File holding the API key (first line)."),
        endpoint: str = typer.Option("chat", help="chat or completions."),
        stream: bool = typer.Option(True, "--stream/--no-stream", help="Stream responses (needed for TTFT/ITL)."),
        concurrency: str = typer.Option(None, help="Closed loop: users per level, e.g. 1,4,16."),
        rate: str = typer.Option(None, help="Open loop, constant rate: requests/s per level, e.g. 1,2,4."),
        poisson: str = typer.Option(None, help="Open loop, Poisson arrivals: mean requests/s per level."),
        burstiness: float = typer.Option(1.0, help="Gamma arrivals: 1 = Poisson, <1 burstier, >1 more even."),
        sweep: str = typer.Option(None, help="'auto': sequential, saturation, then rates in between."),
        sweep_levels: int = typer.Option(4, help="Rates between baseline and saturation for --sweep auto."),
        requests: int = typer.Option(None, help="Requests per level (default 64 when no --duration)."),
        duration: float = typer.Option(None, help="Seconds per level."),
        warmup: str = typer.Option("auto", help="Cut from the window: 'auto', seconds ('10s') or requests ('20')."),
        cooldown: str = typer.Option("auto", help="Cut from the end of the window, like --warmup."),
        workers: int = typer.Option(1, help="Load-generator processes (with --ray: Ray actors across the cluster)."),
        ray: str = typer.Option(None, help="Run the workers on a Ray cluster: 'auto' (this host's) or HOST:PORT (needs infersight[ray])."),
        ray_strategy: str = typer.Option("spread", help="With --ray: 'spread' (best effort) or 'strict-spread' (one worker per node)."),
        ray_cpus: float = typer.Option(1.0, help="With --ray: CPUs each worker reserves."),
        max_concurrency: int = typer.Option(0, help="Cap on requests in flight (0 = none); the excess waits in the client and counts in latency."),
        grace: float = typer.Option(5.0, help="Seconds Ctrl-C waits for requests in flight."),
        input_tokens: str = typer.Option("fixed:64", help="Prompt lengths: fixed:N, uniform:A:B, normal:M:SD, lognormal:M:SD."),
        output_tokens: str = typer.Option(None, help="Output lengths (max_tokens per request), same syntax."),
        max_tokens: int = typer.Option(128, help="max_tokens when --output-tokens is not given."),
        dataset: Path = typer.Option(None, help="OpenAI-messages .jsonl or ShareGPT .json file."),
        shared_prefix: int = typer.Option(0, help="Tokens of one prefix every synthetic prompt shares."),
        ignore_eos: bool = typer.Option(False, "--ignore-eos", help="Ask the server to generate max_tokens exactly."),
        seed: int = typer.Option(0, help="Seed for prompts, lengths and arrival times."),
        slo: str = typer.Option(None, help="Goals, e.g. 'ttft_p99<500ms,tpot_p99<50ms' (goodput)."),
        find_max: bool = typer.Option(False, "--find-max", help="Search the highest rate meeting --slo."),
        find_max_steps: int = typer.Option(5, help="Bisection steps for --find-max."),
        scrape: list[str] = typer.Option(None, help="Prometheus /metrics URL to sample every second (repeatable); by default the target's own /metrics when it answers."),
        no_scrape: bool = typer.Option(False, "--no-scrape", help="Scrape no /metrics (not even the target's own)."),
        out: Path = typer.Option(None, help="Directory for result.json, records.csv and schema.json."),
        price_in: float = typer.Option(None, help="$ per million input tokens."),
        price_out: float = typer.Option(None, help="$ per million output tokens."),
        prices: Path = typer.Option(None, help="Price table file (TOML, like the shipped prices.toml)."),
        diagnose: bool = typer.Option(True, "--diagnose/--no-diagnose", help="Embed and print the diagnosis."),
        progress: bool = typer.Option(True, "--progress/--no-progress", help="Live progress on the terminal."),
        parallel: int = typer.Option(8, help="Embedded engine: slots (ignored with --url)."),
        engine_slots: int = typer.Option(None, help="The target's slot limit (e.g. vLLM --max-num-seqs), for the diagnosis; default: the engine's own export, else inferred from its running count."),
        ctx: int = typer.Option(None, help="Embedded engine: total context (ignored with --url)."),
        timeout: float = typer.Option(600.0, help="Seconds one request may take, from its intended send."),
    ) -> None:
        flags = dict(locals())  # first statement: exactly the flags, by name
        from infersight.entrypoints.bench import run_bench

        result = run_bench(_config(flags))
        if result.partial:
            raise typer.Exit(130)


#: Flags whose BenchConfig field has another name.
_FIELDS = {"parallel": "engine_parallel", "ctx": "engine_ctx"}


def _config(flags: dict[str, Any]) -> BenchConfig:
    """The flags as a validated BenchConfig (one ConfigError line otherwise)."""
    from infersight.bench import BenchConfig, parse_levels
    from infersight.core.errors import ConfigError

    concurrency, rate, poisson = flags.pop("concurrency"), flags.pop("rate"), flags.pop("poisson")
    if rate and poisson:
        raise ConfigError("give --rate (constant) or --poisson, not both")
    arrival = "poisson" if poisson else "constant"
    if flags["burstiness"] != 1.0:
        arrival = "gamma"
    levels: dict[str, Any] = {
        "concurrency": parse_levels(concurrency, int, "--concurrency") if concurrency else None,
        "rate": parse_levels(rate or poisson, float, "--rate" if rate else "--poisson")
        if (rate or poisson) else None,
        "arrival": arrival,
        "scrape": flags.pop("scrape") or None,
    }  # fmt: skip
    given = {
        _FIELDS.get(k, k): str(v) if isinstance(v, Path) else v for k, v in flags.items()
    }
    return BenchConfig.build(**given, **levels)
