"""`infersight diagnose` (why is it slow, idle or expensive?) and `infersight plan`
(will it fit, how many sequences, which settings?)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import orjson
import typer

from infersight.cli import _prometheus as P
from infersight.cli._conventions import (
    api_key_env_option,
    api_key_file_option,
    command_help,
    duration_option,
    format_option,
    llmd_version,
)
from infersight.core.errors import ConfigError
from infersight.engine.config import default_threads

if TYPE_CHECKING:
    from infersight.diagnose.physics import Device

# In the commands, not here: entrypoints (~1.8 s), diagnose.physics (~0.45 s) slow `--help`.

_DIAG_HELP = command_help(
    "Explain a run: what is wrong, the evidence and the fix.",
    "One verdict per time window (per load level for a bench run).",
    "Reads a RunResult (infersight bench --out) or monitor recordings (infersight "
    "monitor --record FILE.jsonl), or watches a live server for --seconds, or diagnoses "
    "every replica a Prometheus scrapes over a range (--prometheus, with a fleet summary).",
    "Other tools' results are read too, told apart by their content: GuideLLM's "
    "benchmarks JSON, AIPerf's profile export (profile_export.jsonl or its aggregate "
    "JSON), vllm bench serve --save-result JSON and inference-perf's reports. With "
    "per-request timings they are diagnosed like a bench run; with aggregates alone the "
    "verdict says what could not be decided.",
    examples=[
        "infersight diagnose runs/demo/result.json",
        "infersight diagnose guidellm-benchmarks.json",
        "infersight diagnose --url http://127.0.0.1:8000 --seconds 30s",
        "infersight diagnose run.json --model path/to/config.json --gpu h100 --json",
        "infersight diagnose --prometheus http://prometheus:9090 --since 1h",
        "infersight diagnose --prometheus http://prom:9090 --selector '{job=\"vllm\"}'",
    ],
)

_PLAN_HELP = command_help(
    "Plan serving capacity: memory, sequences and engine settings.",
    "The memory breakdown, the most concurrent sequences and the engine settings for a "
    "model on a device at a context length. --model takes an HF config.json, a .gguf "
    "file, a folder holding either, or 'embedded' (the built-in SmolLM2-135M). --gpu "
    "takes a name from the peak table (h100, h200, a100-80gb, l4, l40s, a10g, t4, "
    "rtx-4090, mi300x, ...) or 'cpu' (this host, measured).",
    "The slot limit (--parallel, --max-num-seqs) is what the memory holds on a GPU, "
    "twice the batch where decode turns compute-bound on a CPU (an estimate: the CPU's "
    "peak is a generic matmul's). `diagnose` sizes a run's fix from what its load needed "
    "in flight, within what the memory holds, and on a CPU from the run's measured knee.",
    examples=[
        "infersight plan --model config.json --gpu h100 --ctx 8192",
        "infersight plan --model embedded --gpu cpu --ctx 2048 --concurrency 16",
        "infersight plan --model m.gguf --gpu l4 --ctx 4096 --prompt-tokens 1000",
    ],
)


def diagnose_cmd(
    files: list[Path] = typer.Argument(
        None, metavar="FILE", help="RunResult JSON, monitor JSONL, or another tool's result files."
    ),
    url: str = typer.Option(
        None, metavar="URL", help="Watch the server at this root URL instead of reading files."
    ),
    seconds: float = duration_option(30.0, "--seconds", help="With --url: how long to watch."),
    probe: bool = typer.Option(
        True, "--probe/--no-probe", help="With --url: send one small request at a time."
    ),
    api_key_env: str = api_key_env_option(),
    api_key_file: Path = api_key_file_option(),
    window: float = duration_option(
        None,
        "--window",
        help="Window length.",
        show_default=(
            "one window per load level; with --prometheus a sixtieth of the range, at most 15m"
        ),
    ),
    model: str = typer.Option(
        None,
        metavar="MODEL",
        help="Model config.json / .gguf / 'embedded' for the roofline floors.",
    ),
    gpu: str = typer.Option(
        None, metavar="NAME", help="GPU name from the peak table, for the floors."
    ),
    engine_slots: int = typer.Option(
        None,
        help="The engine's slot limit (vLLM --max-num-seqs, ...), when it exports none.",
        show_default=(
            "the run's --engine-slots, else inferred from R's plateau or the capacity curve"
        ),
    ),
    as_json: bool = typer.Option(False, "--json", help="Print verdicts as JSON."),
    output_format: str = format_option(
        "With llm-d, print llm-d-benchmark's benchmark report 0.2.1 (llm-d:0.1 for the 0.1 "
        "line) of each level (a JSON array, the verdicts in each report) instead."
    ),
    interval: float = duration_option(1.0, "--interval", help="With --url: time between samples."),
    prometheus: str = P.PROMETHEUS,
    since: str = P.SINCE,
    start: str = P.START,
    end: str = P.END,
    step: str = P.STEP,
    selector: str = P.SELECTOR,
    http_config: Path = P.HTTP_CONFIG,
) -> None:
    from infersight.entrypoints.diagnose import load_inputs, print_diagnoses, watch_url

    if window is not None and window <= 0:
        raise ConfigError("--window must be > 0 seconds")
    if engine_slots is not None and engine_slots < 1:
        raise ConfigError("--engine-slots must be >= 1")
    device = _check_gpu(gpu) if gpu else None
    if prometheus and llmd_version(output_format):
        raise ConfigError(
            "--format llm-d describes runs: give result files or --url, not --prometheus"
        )
    if prometheus:
        from infersight.entrypoints.prometheus import diagnose_prometheus, print_fleet

        if files or url:
            raise ConfigError("give result files, --url or --prometheus, one of them")
        q = P.fleet_query(
            prometheus,
            since=since,
            start=start,
            end=end,
            step=step,
            selector=selector,
            http_config=http_config,
            window=window,
        )
        print_fleet(
            diagnose_prometheus(q, engine_slots=engine_slots, model=model, gpu=device),
            as_json=as_json,
        )
        return
    if url:
        if files:
            raise ConfigError("give either result files or --url, not both")
        if seconds <= 0:
            raise ConfigError("--seconds must be > 0")
        inputs = watch_url(
            url,
            seconds,
            api_key_env=api_key_env,
            probe=probe,
            interval=interval,
            api_key_file=api_key_file,
        )
    else:
        if not files:
            raise ConfigError(
                "give a RunResult file (or monitor recording), --url URL or --prometheus URL"
            )
        inputs = load_inputs(list(files))
    print_diagnoses(
        inputs,
        window=window,
        model=model,
        gpu=device,
        engine_slots=engine_slots,
        as_json=as_json,
        llmd=llmd_version(output_format),
    )


def plan_cmd(
    model: str = typer.Option(
        ..., metavar="MODEL", help="config.json, .gguf, folder or 'embedded'."
    ),
    gpu: str = typer.Option(..., metavar="NAME", help="GPU from the peak table, or 'cpu'."),
    ctx: int = typer.Option(..., help="Context length per sequence (prompt + output)."),
    concurrency: int = typer.Option(
        None, help="Estimate latency with this many requests kept in flight."
    ),
    tokens: int = typer.Option(
        None, help="Output tokens per request for the estimate.", show_default="256"
    ),
    prompt_tokens: int = typer.Option(
        None,
        help="Prompt tokens per request for the estimate.",
        show_default="the context less --tokens, said as assumed",
    ),
    kv_dtype: str = typer.Option("auto", metavar="auto|fp8|q8_0|q4_0", help="KV cache dtype."),
    gpus: int = typer.Option(1, help="Devices (tensor parallel)."),
    threads: int = typer.Option(
        None,
        help="With --gpu cpu: the engine's threads (as infersight serve and llama.cpp use).",
        show_default="physical cores",
    ),
    weights: str = typer.Option(
        None,
        metavar="DTYPE",
        help="Override the weight dtype: bf16, fp8, int4, q4_0...",
        show_default="the model's",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the plan as JSON."),
) -> None:
    from infersight.diagnose.physics import dtype_bytes, load_shape, plan_capacity
    from infersight.diagnose.plan_console import print_plan

    if ctx <= 0:
        raise ConfigError("--ctx must be a positive number of tokens")
    if gpus < 1:
        raise ConfigError("--gpus must be >= 1")
    if concurrency is not None and concurrency < 1:
        raise ConfigError("--concurrency must be >= 1")
    if tokens is not None and tokens < 1:
        raise ConfigError("--tokens must be >= 1")
    if prompt_tokens is not None and prompt_tokens < 1:
        raise ConfigError("--prompt-tokens must be >= 1")
    if threads is not None and threads < 1:
        raise ConfigError("--threads must be >= 1")
    device = _check_gpu(gpu)
    engine_threads = None
    if device.kind != "cpu":
        device = device.scaled(gpus)
    else:
        # the cores the engine computes on, as diagnose sees a run of it; llama.cpp's -t
        engine_threads = threads or default_threads()
        device = device.with_cores(engine_threads)
    try:
        shape = load_shape(model)
    except ConfigError as e:
        raise ConfigError(f"--model {model}: cannot read the model shape: {e}") from None
    try:
        wb = dtype_bytes(weights) if weights else None
        plan = plan_capacity(
            shape,
            device,
            ctx=ctx,
            kv_dtype=kv_dtype,
            concurrency=concurrency,
            tokens=tokens,
            weight_bytes_per_param=wb,
            prompt_tokens=prompt_tokens,
            threads=engine_threads,
        )
    except ConfigError as e:
        raise ConfigError(str(e)) from None
    if as_json:
        sys.stdout.buffer.write(orjson.dumps(plan.to_dict(), option=orjson.OPT_INDENT_2) + b"\n")
    else:
        print_plan(plan)


def register(app: typer.Typer) -> None:
    """Add ``diagnose`` and ``plan`` to the app."""
    app.command("diagnose", help=_DIAG_HELP)(diagnose_cmd)
    app.command("plan", help=_PLAN_HELP)(plan_cmd)


def _check_gpu(name: str) -> Device:
    from infersight.diagnose.physics import close_gpu_names, find_gpu, measure_cpu

    if name.lower() == "cpu":
        return measure_cpu()
    dev = find_gpu(name)
    if dev is None:
        raise ConfigError(
            f"unknown GPU {name!r}; close names: {', '.join(close_gpu_names(name))} "
            "(or 'cpu' for this host)"
        )
    return dev
