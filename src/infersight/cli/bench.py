"""`infersight bench`: measure a server from one request to saturation."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from infersight.cli._conventions import command_help, format_option, llmd_version
from infersight.cli.bench_vllm import VLLM_PARAMETERS, apply_vllm_flags
from infersight.cli.flag_options import command, declared_options, parameter
from infersight.core.errors import ConfigError
from infersight.flags.bench import (
    DistributionSection,
    LoadSection,
    OutputSection,
    ReplaySection,
    TargetSection,
    TelemetrySection,
    WorkloadSection,
)

if TYPE_CHECKING:
    from infersight.bench import BenchConfig

# In the commands, not here: entrypoints (~1.8 s), bench (~0.4 s) would slow `--help`.

_HELP = command_help(
    "Load-test an OpenAI-compatible server and explain the result.",
    "With no --url the embedded engine is started for the run. Latency counts from the "
    "intended send time (no coordinated omission); a run the load generator itself "
    "limited is flagged at the top of every output.",
    "Durations take units: 500ms, 2s, 1m (a bare number is seconds). vllm bench serve's "
    "flags work too, meaning what they mean there: --num-prompts, --max-concurrency, "
    "--goodput and the 'vllm bench serve options' (--request-rate, --backend, "
    "--dataset-name random --random-input-len N ...); a line of them without a rate "
    "sends every request at once, as vLLM does.",
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


#: The command's own options, each listed after the field named.
_OWN = {
    "rate": [
        parameter(
            "poisson",
            str,
            typer.Option(
                None,
                metavar="LIST",
                help="Open loop, Poisson arrivals: mean requests/s per level.",
                rich_help_panel="Load",
            ),
        )
    ],
    "slo": [
        parameter(
            "goodput",
            list[str],
            typer.Option(
                None,
                metavar="KEY:MS",
                help=(
                    "vllm bench serve's goals: ttft, tpot or e2el in ms, e.g. --goodput "
                    "'ttft:500 tpot:50' (the same as --slo 'ttft<500ms,tpot<50ms')."
                ),
                rich_help_panel="Load",
            ),
        )
    ],
    "out": [
        parameter(
            "output_format",
            str,
            format_option(
                "With llm-d, --out also gets llm-d/benchmark_report_LEVEL.json: "
                "llm-d-benchmark's report 0.2.1 (llm-d:0.1 for the 0.1 line), one per level.",
                panel="Output",
            ),
        )
    ],
}

#: bench's options: every field of the sections with a flag, by section, then vLLM's.
PARAMETERS = [
    *declared_options(TargetSection, panel="Target"),
    *declared_options(LoadSection, panel="Load", after=_OWN),
    *declared_options(WorkloadSection, panel="Workload"),
    *declared_options(ReplaySection, panel="Trace replay and conversation"),
    *declared_options(DistributionSection, panel="Workers"),
    *declared_options(TelemetrySection, panel="Telemetry"),
    *declared_options(OutputSection, panel="Output", after=_OWN),
    *VLLM_PARAMETERS,
]


def register(app: typer.Typer) -> None:
    """Add ``bench`` to the app."""

    @app.command("bench", help=_HELP, no_args_is_help=False)
    @command(PARAMETERS)
    def bench(**flags: Any) -> None:
        from infersight.entrypoints.bench import run_bench

        llmd = llmd_version(flags.pop("output_format"))
        if llmd and not flags["out"]:
            raise ConfigError("--format llm-d writes into --out DIR: give --out")
        result = run_bench(_config(flags), llmd=llmd)
        if result.partial:
            raise typer.Exit(130)


def _config(flags: dict[str, Any]) -> BenchConfig:
    """The flags as a validated BenchConfig (one ConfigError line otherwise)."""
    from infersight.bench import BenchConfig, parse_levels

    apply_vllm_flags(flags)  # vllm bench serve's names, as the settings they mean
    rate, poisson = flags["rate"], flags.pop("poisson")
    goals = [flags.pop("slo"), *(goodput_to_slo(g) for g in flags.pop("goodput") or [])]
    flags["slo"] = ",".join(g for g in goals if g) or None
    if rate and poisson:
        raise ConfigError("give --rate (constant) or --poisson, not both")
    if poisson:
        flags["rate"] = parse_levels(poisson, float, "--poisson")
    if poisson:
        flags["arrival"] = "poisson"
    if flags["burstiness"] not in (None, 1.0):
        flags["arrival"] = "gamma"
    return BenchConfig.build(**{k: str(v) if isinstance(v, Path) else v for k, v in flags.items()})


#: vllm bench serve's --goodput keys (values in ms) and the SLO metric each is.
_GOODPUT_KEYS = {"ttft": "ttft", "tpot": "tpot", "e2el": "e2e", "itl": "itl"}


def goodput_to_slo(text: str) -> str:
    """vLLM's ``--goodput 'ttft:500 tpot:50'`` (ms, per request) as ``--slo`` goals."""
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
