"""`infersight tune`: try the fix the diagnosis gives, and measure it."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import typer

from infersight.cli._conventions import (
    command_help,
    format_option,
    llmd_version,
)
from infersight.cli.flag_options import command, declared_options, parameter
from infersight.flags.bench import LoadSection, TargetSection, WorkloadSection
from infersight.flags.tune import TuneConfig

if TYPE_CHECKING:
    from infersight.bench import BenchConfig

# In the commands, not here: entrypoints (~1.8 s), bench (~0.4 s) would slow `--help`.

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


#: The trials' workload: bench's options, where tune's defaults differ shown as tune's.
_TRIAL = {
    LoadSection: ("slo", "concurrency", "rate", "requests", "duration"),
    WorkloadSection: ("input_tokens", "output_tokens", "max_tokens", "dataset", "seed"),
    TargetSection: ("endpoint", "api_key_env", "api_key_file"),
}
_TRIAL_DEFAULTS: dict[str, str | bool] = {
    "slo": "best sustainable throughput",
    "concurrency": "the trial's slots",
    "requests": False,
    "duration": "15s without --requests",
}
_FORMAT = parameter(
    "output_format",
    str,
    format_option(
        "With llm-d, each trial's folder also gets llm-d/benchmark_report_LEVEL.json: "
        "llm-d-benchmark's report 0.2.1 (llm-d:0.1 for the 0.1 line), one per level.",
        panel="Tune",
    ),
)

#: tune's options: its own, then each trial's load.
PARAMETERS = [
    *declared_options(TuneConfig, panel="Tune", after={"out": [_FORMAT]}),
    *(
        p
        for section, names in _TRIAL.items()
        for p in declared_options(
            section, panel="Each trial's load", only=names, show_default=_TRIAL_DEFAULTS
        )
    ),
]


def register(app: typer.Typer) -> None:
    """Add ``tune`` to the app."""

    @app.command("tune", help=_HELP, no_args_is_help=False)
    @command(PARAMETERS)
    def tune(**flags: Any) -> None:
        from infersight.entrypoints.tune import run_tune

        llmd = llmd_version(flags.pop("output_format"))
        cfg, bench = _configs(flags)
        result = run_tune(cfg, bench, llmd=llmd)
        if result.stopped == "interrupted":
            raise typer.Exit(130)
        if result.stopped == "baseline failed":
            raise typer.Exit(1)


def _configs(flags: dict[str, Any]) -> tuple[TuneConfig, BenchConfig]:
    """The flags as a TuneConfig and the trials' shared BenchConfig, both checked now."""
    from infersight.bench import BenchConfig

    own = {f.name: flags.pop(f.name) for f in dataclasses.fields(TuneConfig)}
    cfg = TuneConfig.build(**own)
    if flags["requests"] is None and flags["duration"] is None:
        flags["duration"] = 15.0
    bench = BenchConfig.build(
        **flags,
        model=None if cfg.target_kind == "embedded" else cfg.model,
        progress=False,
        diagnose=True,
    )
    return cfg, bench
