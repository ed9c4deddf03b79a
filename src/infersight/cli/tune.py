"""`infersight tune`: try the fix the diagnosis gives, and measure it."""

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

if TYPE_CHECKING:
    from infersight.bench import BenchConfig
    from infersight.tune import TuneConfig

_HELP = command_help(
    "Find the setting with the highest goodput, by trying it.",
    "Runs the baseline twice (the spread of the pair is the noise floor), diagnoses it, "
    "and follows the diagnosis: slot-bound -> slots toward its number, compute-bound -> "
    "threads or fewer slots, KV-bound -> less context; a bisection over that knob "
    "follows. Each trial is a bench run with the same prompts and seed; a setting counts "
    "as better only beyond the noise floor, and the winner runs again at the end.",
    "Targets: the embedded engine (started per trial), any server from a --launch "
    "template (restarted per trial; {port} and a slot placeholder such as "
    "{max_num_seqs}, {parallel}, {slots}, plus {threads}, {ctx}, {ctx_per_slot}), or a "
    "gateway upstream's limit (--url with --upstream, no restart).",
    "Writes OUT/tune.json (each trial names its RunResult), OUT/tune.html and "
    "OUT/trials/. Ctrl-C keeps what is done.",
    examples=[
        "infersight tune --slo 'ttft_p99<2s,tpot_p99<100ms' --budget 20m",
        "infersight tune --knob slots --values 1,2,4,8,16 --search grid",
        "# any server, restarted per trial with its slot limit and a free port",
        "infersight tune --slots 64 --launch './start-vllm.sh {slots} {port}'",
        "infersight tune --url http://127.0.0.1:8090 --upstream vllm",
        "# trials in parallel, one per Ray node (its server and load on that node)",
        "infersight tune --ray auto --slots 64 --launch './vllm.sh {slots} {port}'",
    ],
)


def register(app: typer.Typer) -> None:
    """Add ``tune`` to the app."""

    @app.command("tune", help=_HELP, no_args_is_help=False)
    def tune(
        launch: str = typer.Option(
            None,
            metavar="TEMPLATE",
            help=(
                "Command that starts the server for a trial, with {port} and the knobs' "
                "placeholders."
            ),
        ),
        url: str = typer.Option(
            None, metavar="URL", help="A running gateway's root URL: tune its --upstream's limit."
        ),
        upstream: str = typer.Option(
            None,
            metavar="NAME",
            help="With --url: the gateway upstream whose concurrency limit tune changes.",
        ),
        slots: int = typer.Option(
            None,
            "--slots",
            "--parallel",
            "--max-num-seqs",
            help="Baseline slots: requests decoded at once.",
            show_default="8 for the embedded engine, the gateway's limit",
        ),
        threads: int = typer.Option(
            None,
            help="Baseline compute threads (embedded engine, {threads}).",
            show_default="the physical cores",
        ),
        ctx: int = typer.Option(
            None,
            help="Baseline context tokens per slot (embedded engine, {ctx_per_slot}).",
            show_default="2048",
        ),
        model: str = typer.Option(
            None,
            help="Model: a GGUF file for the embedded engine, else the id to request.",
            show_default="the embedded default, else the first listed",
        ),
        health_path: str = typer.Option(
            "/health",
            metavar="PATH",
            help="With --launch: the path that answers 200 once the server is ready.",
        ),
        start_timeout: float = duration_option(
            120.0,
            "--start-timeout",
            help=(
                "With --launch: how long a server may take to become healthy; past it the trial "
                "fails."
            ),
        ),
        search: str = typer.Option(
            "guided",
            metavar="guided|grid",
            help="'guided': the diagnosis, then bisection; 'grid': every value (the reference).",
        ),
        knob: str = typer.Option(
            None,
            metavar="slots|threads|ctx",
            help="Search this knob whatever the diagnosis says.",
            show_default="the diagnosis's",
        ),
        values: str = typer.Option(
            None,
            metavar="LIST",
            help="The knob's values to search, e.g. 1,2,4,8,16.",
            show_default="a ladder around the baseline and the target",
        ),
        budget: float = duration_option(
            None,
            "--budget",
            help="Bound the whole run's wall time, e.g. 20m; the winner's re-run fits inside.",
        ),
        ray: str = typer.Option(
            None,
            "--ray",
            metavar="ADDRESS",
            help=(
                "Trials in parallel on a Ray cluster (auto, or HOST:PORT): one per node, its "
                "--launch server and load generator both on that node. Needs the ray extra."
            ),
        ),
        gpus_per_trial: int = typer.Option(
            None,
            "--gpus-per-trial",
            metavar="N",
            help="With --ray: one trial per N GPUs of a node, instead of one per node.",
            show_default="one trial per node, with all its GPUs",
        ),
        slo: str = typer.Option(
            None,
            metavar="GOALS",
            help="Goals, e.g. 'ttft_p99<2s,tpot_p99<100ms': the objective is goodput within them.",
            show_default="best sustainable throughput",
        ),
        concurrency: str = typer.Option(
            None,
            metavar="LIST",
            help="Each trial's levels: requests kept in flight, e.g. 4,16.",
            show_default="the trial's slots",
        ),
        rate: str = typer.Option(
            None, metavar="LIST", help="Each trial's levels: open loop at these requests/s."
        ),
        requests: int = typer.Option(
            None, "--requests", "--num-prompts", help="Requests per level."
        ),
        duration: float = duration_option(
            None,
            "--duration",
            help="How long each level sends.",
            show_default="15s without --requests",
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
        seed: int = typer.Option(0, help="Seed for prompts and lengths: the same in every trial."),
        endpoint: str = typer.Option(
            "chat", metavar="chat|completions", help="The OpenAI API to call."
        ),
        api_key_env: str = api_key_env_option(),
        api_key_file: Path = api_key_file_option(),
        out: Path = out_option(
            None,
            metavar="DIR",
            help="Directory for tune.json, tune.html and each trial's RunResult.",
            show_default="runs/tune-DATE-TIME",
        ),
        output_format: str = format_option(
            "With llm-d, each trial's folder also gets llm-d/benchmark_report_LEVEL.json: "
            "llm-d-benchmark's report 0.2.1 (llm-d:0.1 for the 0.1 line), one per level."
        ),
        progress: bool = typer.Option(
            True, "--progress/--no-progress", help="Live progress on the terminal."
        ),
    ) -> None:
        flags = dict(locals())  # first statement: exactly the flags, by name
        from infersight.entrypoints.tune import run_tune

        llmd = llmd_version(flags.pop("output_format"))
        cfg, bench = _configs(flags)
        result = run_tune(cfg, bench, llmd=llmd)
        if result.stopped == "interrupted":
            raise typer.Exit(130)
        if result.stopped == "baseline failed":
            raise typer.Exit(1)


#: Flags that belong to tune itself (the rest describe each trial's bench run).
_TUNE = (
    "launch",
    "url",
    "upstream",
    "slots",
    "threads",
    "ctx",
    "model",
    "health_path",
    "start_timeout",
    "search",
    "knob",
    "values",
    "budget",
    "ray",
    "gpus_per_trial",
    "out",
    "progress",
)


def _configs(flags: dict[str, Any]) -> tuple[TuneConfig, BenchConfig]:
    """The flags as a TuneConfig and the trials' shared BenchConfig, both checked now."""
    from infersight.bench import BenchConfig, parse_levels
    from infersight.tune import TuneConfig

    own = {k: flags.pop(k) for k in _TUNE}
    if own["values"]:
        own["values"] = parse_levels(own["values"], int, "--values")
    own["out"] = str(own["out"]) if own["out"] else None
    cfg = TuneConfig.build(**own)
    concurrency, rate = flags.pop("concurrency"), flags.pop("rate")
    if flags["requests"] is None and flags["duration"] is None:
        flags["duration"] = 15.0
    bench = BenchConfig.build(
        **{k: str(v) if isinstance(v, Path) else v for k, v in flags.items()},
        concurrency=parse_levels(concurrency, int, "--concurrency") if concurrency else None,
        rate=parse_levels(rate, float, "--rate") if rate else None,
        model=None if cfg.target_kind == "embedded" else own["model"],
        progress=False,
        diagnose=True,
    )
    return cfg, bench
