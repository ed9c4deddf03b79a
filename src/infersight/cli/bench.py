"""`infersight bench`: measure a server from one request to saturation."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from infersight.cli._conventions import (
    api_key_env_option,
    api_key_file_option,
    command_help,
    duration_option,
    format_option,
    llmd_version,
    out_option,
)
from infersight.cli.bench_vllm import VLLM_OPTIONS, apply_vllm_flags

if TYPE_CHECKING:
    from infersight.bench import BenchConfig

_HELP = command_help(
    "Load-test an OpenAI-compatible server and explain the result.",
    "With no --url the embedded engine is started for the run. Latency counts from the "
    "intended send time (no coordinated omission); a run the load generator itself "
    "limited is flagged at the top of every output.",
    "Durations take units: 500ms, 2s, 1m (a bare number is seconds). vllm bench serve's "
    "flags work too, meaning what they mean there (marked below): --num-prompts, "
    "--max-concurrency, --goodput, --request-rate, --backend, --dataset-name random "
    "--random-input-len N ...; a line of them without a rate sends every request at "
    "once, as vLLM does.",
    examples=[
        "infersight bench --concurrency 1,4,16 --requests 48 --out runs/demo",
        "infersight bench --url http://127.0.0.1:8000 --rate 1,2,4 --duration 1m",
        "infersight bench --url URL --find-max --slo 'ttft_p99<500ms,tpot_p99<50ms'",
        "infersight bench --url URL --concurrency 8 --duration 30s --repeat 3 -o A",
        "infersight bench --url URL --rate 200 --duration 1m --ray auto --workers 4",
        "infersight bench --backend vllm --dataset-name random --request-rate 4",
        "infersight bench --url URL --trace access.log --speedup 1,2 --window 10m-20m",
        "infersight bench --url URL --sessions 20 --concurrency 4 --shared-prefix 200",
    ],
)


def register(app: typer.Typer) -> None:
    """Add ``bench`` to the app."""

    @app.command("bench", help=_HELP, no_args_is_help=False)
    def bench(
        url: str = typer.Option(
            None,
            metavar="URL",
            help="The server's root URL, e.g. http://127.0.0.1:8000.",
            show_default="start the embedded engine",
        ),
        model: str = typer.Option(
            None, help="Model id.", show_default="the first the server lists"
        ),
        api_key_env: str = api_key_env_option(),
        api_key_file: Path = api_key_file_option(),
        endpoint: str = typer.Option(
            None,
            metavar="chat|completions",
            help="The OpenAI API to call (vLLM's /v1/chat/completions and /v1/completions too).",
            show_default="chat",
        ),
        stream: bool = typer.Option(
            True, "--stream/--no-stream", help="Stream responses (needed for TTFT/ITL)."
        ),
        concurrency: str = typer.Option(
            None,
            metavar="LIST",
            help="Closed loop: requests kept in flight, one level per value, e.g. 1,4,16.",
        ),
        rate: str = typer.Option(
            None, metavar="LIST", help="Open loop, constant rate: requests/s per level, e.g. 1,2,4."
        ),
        poisson: str = typer.Option(
            None, metavar="LIST", help="Open loop, Poisson arrivals: mean requests/s per level."
        ),
        burstiness: float = typer.Option(
            1.0, help="Gamma arrivals: 1 = Poisson, <1 burstier, >1 more even."
        ),
        sweep: str = typer.Option(
            None,
            metavar="MODE",
            help="'auto': sequential, saturation, then rates in between. 'closed': "
            "1, 2, 4, ... clients until throughput stops growing twice (the levels the "
            "server model needs to check itself).",
        ),
        sweep_levels: int = typer.Option(
            4, help="Rates between baseline and saturation for --sweep auto."
        ),
        requests: int = typer.Option(
            None,
            "--requests",
            "--num-prompts",
            help="Requests per level (--num-prompts as in vllm bench serve).",
            show_default="64 without --duration",
        ),
        duration: float = duration_option(None, "--duration", help="How long each level sends."),
        repeat: int = typer.Option(
            1, help="Run each level N times, interleaved; report A B then compares run against run."
        ),
        warmup: str = typer.Option(
            "auto",
            metavar="CUT",
            help=(
                "Cut from the start of the window: 'auto', a duration ('10s') or a request count "
                "('20')."
            ),
        ),
        cooldown: str = typer.Option(
            "auto", metavar="CUT", help="Cut from the end of the window, like --warmup."
        ),
        workers: int = typer.Option(
            1, help="Load-generator processes (with --ray: Ray actors across the cluster)."
        ),
        ray: str = typer.Option(
            None,
            metavar="ADDRESS",
            help=(
                "Run the workers on a Ray cluster: 'auto' (this host's) or HOST:PORT (needs "
                "infersight[ray])."
            ),
        ),
        ray_strategy: str = typer.Option(
            "spread",
            metavar="spread|strict-spread",
            help="With --ray: 'spread' (best effort) or 'strict-spread' (one worker per node).",
        ),
        ray_cpus: float = typer.Option(1.0, help="With --ray: CPUs each worker reserves."),
        max_concurrency: int = typer.Option(
            0,
            help=(
                "At most this many requests in flight (0 = no cap); the excess waits in the "
                "client and counts in latency."
            ),
        ),
        grace: float = duration_option(
            5.0, "--grace", help="How long Ctrl-C waits for requests in flight."
        ),
        input_tokens: str = typer.Option(
            "fixed:64",
            metavar="DIST",
            help="Prompt lengths: fixed:N, uniform:A:B, normal:M:SD, lognormal:M:SD.",
        ),
        output_tokens: str = typer.Option(
            None, metavar="DIST", help="Output lengths (max_tokens per request), same syntax."
        ),
        max_tokens: int = typer.Option(128, help="max_tokens when --output-tokens is not given."),
        dataset: Path = typer.Option(
            None, metavar="FILE", help="OpenAI-messages .jsonl or ShareGPT .json file."
        ),
        shared_prefix: int = typer.Option(
            0, help="Tokens of one prefix every synthetic prompt shares."
        ),
        ignore_eos: bool = typer.Option(
            False, "--ignore-eos", help="Ask the server to generate max_tokens exactly."
        ),
        seed: int = typer.Option(0, help="Seed for prompts, lengths and arrival times."),
        slo: str = typer.Option(
            None,
            metavar="GOALS",
            help=(
                "Goals, e.g. 'ttft_p99<500ms,tpot_p99<50ms' (goodput counts the requests within "
                "them)."
            ),
        ),
        goodput: list[str] = typer.Option(
            None,
            metavar="KEY:MS",
            help=(
                "vllm bench serve's goals: ttft, tpot or e2el in ms, e.g. --goodput 'ttft:500 "
                "tpot:50' (the same as --slo 'ttft<500ms,tpot<50ms')."
            ),
        ),
        find_max: bool = typer.Option(
            False, "--find-max", help="Search the highest rate meeting --slo."
        ),
        find_max_steps: int = typer.Option(5, help="Bisection steps for --find-max."),
        scrape: list[str] = typer.Option(
            None,
            metavar="URL",
            help=(
                "Prometheus /metrics URL to sample every second (repeatable); by default the "
                "target's own /metrics when it answers."
            ),
        ),
        no_scrape: bool = typer.Option(
            False, "--no-scrape", help="Scrape no /metrics (not even the target's own)."
        ),
        out: Path = out_option(
            None, metavar="DIR", help="Directory for result.json, records.csv and schema.json."
        ),
        output_format: str = format_option(
            "With llm-d, --out also gets llm-d/benchmark_report_LEVEL.json: llm-d-benchmark's "
            "report 0.2.1 (llm-d:0.1 for the 0.1 line), one per level."
        ),
        price_in: float = typer.Option(None, help="$ per million input tokens."),
        price_out: float = typer.Option(None, help="$ per million output tokens."),
        prices: Path = typer.Option(
            None, metavar="FILE", help="Price table file (TOML, like the shipped prices.toml)."
        ),
        diagnose: bool = typer.Option(
            True, "--diagnose/--no-diagnose", help="Embed and print the diagnosis."
        ),
        progress: bool = typer.Option(
            True, "--progress/--no-progress", help="Live progress on the terminal."
        ),
        parallel: int = typer.Option(
            8, help="Embedded engine: slots, requests decoded together (ignored with --url)."
        ),
        engine_slots: int = typer.Option(
            None,
            help=(
                "The target's slot limit (e.g. vLLM --max-num-seqs), for the diagnosis; without "
                "it, the engine's own export, else inferred from its running count."
            ),
        ),
        ctx: int = typer.Option(
            None, help="Embedded engine: total context in tokens (ignored with --url)."
        ),
        timeout: float = duration_option(
            600.0, "--timeout", help="How long one request may take, from its intended send."
        ),
        base_url: str = VLLM_OPTIONS["base_url"],
        host: str = VLLM_OPTIONS["host"],
        port: int = VLLM_OPTIONS["port"],
        backend: str = VLLM_OPTIONS["backend"],
        request_rate: str = VLLM_OPTIONS["request_rate"],
        save_result: bool = VLLM_OPTIONS["save_result"],
        result_dir: Path = VLLM_OPTIONS["result_dir"],
        result_filename: str = VLLM_OPTIONS["result_filename"],
        dataset_name: str = VLLM_OPTIONS["dataset_name"],
        dataset_path: Path = VLLM_OPTIONS["dataset_path"],
        random_input_len: int = VLLM_OPTIONS["random_input_len"],
        random_output_len: int = VLLM_OPTIONS["random_output_len"],
        random_range_ratio: float = VLLM_OPTIONS["random_range_ratio"],
        percentile_metrics: str = VLLM_OPTIONS["percentile_metrics"],
        metric_percentiles: str = VLLM_OPTIONS["metric_percentiles"],
        # -- trace replay and conversations (bench/replay/check.py) --
        trace: Path = typer.Option(
            None,
            metavar="FILE",
            help=(
                "Replay a trace at its own times: the gateway's access log, Mooncake JSONL, "
                "BurstGPT CSV, or a CSV of timestamp,input_tokens,output_tokens (detected)."
            ),
        ),
        trace_format: str = typer.Option(
            None,
            metavar="FORMAT",
            help="The trace's format, instead of detecting it: gateway, mooncake, burstgpt or csv.",
        ),
        speedup: str = typer.Option(
            None,
            metavar="LIST",
            help="With --trace: replay this many times faster, one level per value, e.g. 1,2,4.",
            show_default="1",
        ),
        window: str = typer.Option(
            None,
            metavar="RANGE",
            help=(
                "With --trace: START-END, the part to replay from its first request, e.g. "
                "10m-20m, 90s- or -5m."
            ),
        ),
        on_bad_line: str = typer.Option(
            "error",
            metavar="error|skip",
            help=(
                "A trace line that cannot be used: refuse the run naming it, or skip and count it."
            ),
        ),
        block_size: int = typer.Option(
            512, help="With --trace: tokens a Mooncake hash id stands for."
        ),
        sessions: int = typer.Option(
            None,
            metavar="N",
            help=(
                "Conversations per level, each turn sent with the whole history and the answers "
                "received (with --concurrency or --rate)."
            ),
        ),
        turns: str = typer.Option(
            "fixed:4",
            metavar="DIST",
            help="With --sessions: turns per conversation, e.g. fixed:4 or uniform:2:8.",
        ),
        think_time: str = typer.Option(
            "0s",
            metavar="DIST",
            help=(
                "With --sessions: the pause after each answer: 2s, uniform:1s:5s or exponential:3s."
            ),
        ),
    ) -> None:
        flags = dict(locals())  # first statement: exactly the flags, by name
        from infersight.core.errors import ConfigError
        from infersight.entrypoints.bench import run_bench

        llmd = llmd_version(flags.pop("output_format"))
        if llmd and not out:
            raise ConfigError("--format llm-d writes into --out DIR: give --out")
        result = run_bench(_config(flags), llmd=llmd)
        if result.partial:
            raise typer.Exit(130)


#: Flags whose BenchConfig field has another name.
_FIELDS = {"parallel": "engine_parallel", "ctx": "engine_ctx", "window": "trace_window"}


def _config(flags: dict[str, Any]) -> BenchConfig:
    """The flags as a validated BenchConfig (one ConfigError line otherwise)."""
    from infersight.bench import BenchConfig, parse_levels
    from infersight.core.errors import ConfigError

    apply_vllm_flags(flags)  # vllm bench serve's names, as the settings they mean
    concurrency, rate, poisson = flags.pop("concurrency"), flags.pop("rate"), flags.pop("poisson")
    goals = [flags.pop("slo"), *(goodput_to_slo(g) for g in flags.pop("goodput") or [])]
    flags["slo"] = ",".join(g for g in goals if g) or None
    if rate and poisson:
        raise ConfigError("give --rate (constant) or --poisson, not both")
    arrival = "poisson" if poisson else "constant"
    if flags["burstiness"] != 1.0:
        arrival = "gamma"
    levels: dict[str, Any] = {
        "concurrency": parse_levels(concurrency, int, "--concurrency") if concurrency else None,
        "rate": parse_levels(rate or poisson, float, "--rate" if rate else "--poisson")
        if (rate or poisson)
        else None,
        "arrival": arrival,
        "scrape": flags.pop("scrape") or None,
        "speedup": parse_levels(speedup, float, "--speedup")
        if (speedup := flags.pop("speedup"))
        else None,
    }
    given = {_FIELDS.get(k, k): str(v) if isinstance(v, Path) else v for k, v in flags.items()}
    return BenchConfig.build(**given, **levels)


#: vllm bench serve's --goodput keys (values in ms) and the SLO metric each is.
_GOODPUT_KEYS = {"ttft": "ttft", "tpot": "tpot", "e2el": "e2e", "itl": "itl"}


def goodput_to_slo(text: str) -> str:
    """vLLM's ``--goodput 'ttft:500 tpot:50'`` (ms, per request) as ``--slo`` goals."""
    from infersight.core.errors import ConfigError

    goals = []
    for part in text.replace(",", " ").split():
        key, sep, ms = part.partition(":")
        if not sep or key not in _GOODPUT_KEYS or not ms.replace(".", "", 1).isdigit():
            raise ConfigError(
                f"--goodput {part!r}: expected KEY:MS with KEY one of "
                f"{', '.join(_GOODPUT_KEYS)}, e.g. ttft:500"
            )
        goals.append(f"{_GOODPUT_KEYS[key]}<{ms}ms")
    return ",".join(goals)
