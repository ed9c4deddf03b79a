"""``vllm bench serve``'s flags on ``infersight bench``, so a command line pasted from
vLLM's benchmark docs runs as it is.

Each flag is read as vLLM reads it and turned into this command's own settings:

- ``--base-url`` is ``--url``; ``--host``/``--port`` make ``http://HOST:PORT``.
- ``--backend openai|vllm`` calls ``/v1/completions``, ``openai-chat`` calls
  ``/v1/chat/completions`` (vLLM's endpoint for each); ``--endpoint`` takes the path
  too. Other backends (audio, embeddings, responses) have no equivalent here.
- ``--request-rate R`` is an open loop with Poisson arrivals (gamma with
  ``--burstiness``), as in vLLM; ``inf`` sends every request at once. A vLLM command
  line without a rate means ``inf``, vLLM's default, and so it does here.
- ``--save-result`` writes the outputs to ``--result-dir`` (default: here), the
  RunResult under ``--result-filename`` when given.
- ``--dataset-name random`` with ``--random-input-len``/``--random-output-len``
  (vLLM's defaults 1024 and 128, ``--random-range-ratio`` for a uniform spread);
  ``sharegpt`` (or any) with ``--dataset-path``.
- ``--percentile-metrics``/``--metric-percentiles`` add vLLM's per-metric lines.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from infersight.cli.flag_options import parameter
from infersight.core.errors import ConfigError
from infersight.flags.bench import ENDPOINTS

__all__ = ["VLLM_PARAMETERS", "apply_vllm_flags"]

#: The OpenAI API each accepted ``--backend`` calls (vLLM's default ``--endpoint``).
BACKENDS = {"vllm": "completions", "openai": "completions", "openai-chat": "chat"}
#: vLLM's ``--percentile-metrics`` names and the record attribute each reads.
PERCENTILE_METRICS = {"ttft": "ttft", "tpot": "tpot", "itl": "itl", "e2el": "e2e"}
#: vLLM's random dataset defaults.
RANDOM_INPUT_LEN, RANDOM_OUTPUT_LEN = 1024, 128


def _option(*args: Any, **kwargs: Any) -> Any:
    """An option listed under vLLM's own heading in ``bench --help``."""
    return typer.Option(*args, rich_help_panel="vllm bench serve", **kwargs)


#: name -> typer option: the bench command's options of vLLM's names.
_OPTIONS: dict[str, Any] = {
    "base_url": _option(
        None, "--base-url", metavar="URL", help="The server's root URL: the same as --url."
    ),
    "host": _option(
        None,
        "--host",
        metavar="HOST",
        help="The server's host, with --port: http://HOST:PORT.",
        show_default="127.0.0.1",
    ),
    "port": _option(
        None,
        "--port",
        metavar="N",
        help="The server's port, with --host.",
        show_default="8000",
    ),
    "backend": _option(
        None,
        "--backend",
        metavar="openai|openai-chat|vllm",
        help=(
            "The OpenAI API: openai and vllm call /v1/completions, openai-chat "
            "/v1/chat/completions; without a load flag, every request is sent at once (vLLM's "
            "--request-rate inf)."
        ),
    ),
    "request_rate": _option(
        None,
        "--request-rate",
        metavar="LIST",
        help=(
            "Open loop, Poisson arrivals (gamma with --burstiness): requests/s, or inf to send "
            "every request at once."
        ),
    ),
    "save_result": _option(
        False,
        "--save-result",
        help="Write result.json, records.csv and schema.json to --result-dir.",
    ),
    "result_dir": _option(
        None,
        "--result-dir",
        metavar="DIR",
        help="With --save-result: the folder.",
        show_default="the current folder",
    ),
    "result_filename": _option(
        None,
        "--result-filename",
        metavar="FILE",
        help="With --save-result: the RunResult JSON's file name in --result-dir.",
        show_default="result.json",
    ),
    "dataset_name": _option(
        None,
        "--dataset-name",
        metavar="random|sharegpt",
        help=(
            "random: synthetic prompts of --random-input-len tokens; sharegpt (or custom): the "
            "--dataset-path file."
        ),
    ),
    "dataset_path": _option(
        None,
        "--dataset-path",
        metavar="FILE",
        help="The dataset file: the same as --dataset.",
    ),
    "random_input_len": _option(
        None,
        "--random-input-len",
        metavar="N",
        help="With --dataset-name random: prompt tokens.",
        show_default=str(RANDOM_INPUT_LEN),
    ),
    "random_output_len": _option(
        None,
        "--random-output-len",
        metavar="N",
        help="With --dataset-name random: output tokens (max_tokens).",
        show_default=str(RANDOM_OUTPUT_LEN),
    ),
    "random_range_ratio": _option(
        0.0,
        "--random-range-ratio",
        metavar="NUMBER",
        help="With --dataset-name random: lengths uniform within ±this fraction.",
    ),
    "percentile_metrics": _option(
        None,
        "--percentile-metrics",
        metavar="LIST",
        help="Also print mean, median and --metric-percentiles of: ttft, tpot, itl, e2el.",
    ),
    "metric_percentiles": _option(
        None,
        "--metric-percentiles",
        metavar="LIST",
        help="Percentiles for --percentile-metrics, e.g. 50,90,99.",
        show_default="99",
    ),
}

#: The options, as parameters of the bench command.
#: The options' value types other than text.
_TYPES = {
    "port": int,
    "save_result": bool,
    "result_dir": Path,
    "dataset_path": Path,
    "random_input_len": int,
    "random_output_len": int,
    "random_range_ratio": float,
}
VLLM_PARAMETERS = [parameter(n, _TYPES.get(n, str), option) for n, option in _OPTIONS.items()]

_LOAD_FLAGS = ("concurrency", "rate", "poisson", "sweep", "find_max")


def _url(flags: dict[str, Any], base_url: str | None, host: str | None, port: int | None) -> None:
    given = [n for n, v in (("--url", flags.get("url")), ("--base-url", base_url)) if v]
    if len(given) > 1:
        raise ConfigError("give --url or --base-url, not both")
    if (host or port is not None) and given:
        raise ConfigError(f"give {given[0]} or --host/--port, not both")
    if port is not None and not 0 < port < 65536:
        raise ConfigError(f"--port {port}: expected a port number between 1 and 65535")
    if base_url:
        flags["url"] = base_url
    elif host or port is not None:
        h = host or "127.0.0.1"
        flags["url"] = f"http://{f'[{h}]' if ':' in h else h}:{port or 8000}"


def _endpoint(flags: dict[str, Any], backend: str | None, given: str | None) -> None:
    if backend is not None and backend not in BACKENDS:
        raise ConfigError(
            f"--backend {backend}: infersight calls the OpenAI API: give openai or vllm "
            "(/v1/completions) or openai-chat (/v1/chat/completions)"
        )
    api = BACKENDS[backend] if backend else None
    if given is not None:
        api = ENDPOINTS.get(given.rstrip("/"))
        if api is None:
            raise ConfigError(
                f"--endpoint {given}: expected chat or completions (or vLLM's "
                "/v1/chat/completions or /v1/completions)"
            )
    flags["endpoint"] = api or "chat"


def _dataset(
    flags: dict[str, Any],
    name: str | None,
    path: Path | None,
    ins: int | None,
    outs: int | None,
    ratio: float,
) -> None:
    if path is not None:
        if flags.get("dataset") is not None:
            raise ConfigError("give --dataset or --dataset-path, not both")
        flags["dataset"] = path
    if name is None:
        if ins is not None or outs is not None:
            raise ConfigError(
                "--random-input-len/--random-output-len go with --dataset-name random"
            )
        return
    if name == "random":
        if path is not None:
            raise ConfigError("--dataset-name random makes its prompts: drop --dataset-path")
        if not 0 <= ratio < 1:
            raise ConfigError(f"--random-range-ratio {ratio}: expected a fraction in [0, 1)")
        for n, v in (("--random-input-len", ins), ("--random-output-len", outs)):
            if v is not None and v < 1:
                raise ConfigError(f"{n} must be >= 1")
        flags["input_tokens"] = _spread(ins or RANDOM_INPUT_LEN, ratio)
        flags["output_tokens"] = _spread(outs or RANDOM_OUTPUT_LEN, ratio)
    elif name in ("sharegpt", "custom"):
        if flags.get("dataset") is None:
            raise ConfigError(f"--dataset-name {name} needs --dataset-path FILE")
    else:
        raise ConfigError(f"--dataset-name {name}: infersight reads random, sharegpt or custom")


def _spread(n: int, ratio: float) -> str:
    """vLLM's random lengths: uniform in [n(1-r), n(1+r)], fixed when r is 0."""
    if ratio == 0:
        return f"fixed:{n}"
    return f"uniform:{max(1, round(n * (1 - ratio)))}:{max(1, round(n * (1 + ratio)))}"


def _percentiles(flags: dict[str, Any], metrics: str | None, percentiles: str | None) -> None:
    if metrics is None and percentiles is None:
        return
    names = [m.strip() for m in (metrics or "ttft,tpot,itl").split(",") if m.strip()]
    bad = [m for m in names if m not in PERCENTILE_METRICS]
    if bad or not names:
        raise ConfigError(
            f"--percentile-metrics {metrics}: expected some of {', '.join(PERCENTILE_METRICS)}"
        )
    try:
        qs = [float(q) for q in (percentiles or "99").split(",") if q.strip()]
    except ValueError:
        qs = []
    if not qs or not all(0 < q < 100 for q in qs):
        raise ConfigError(
            f"--metric-percentiles {percentiles}: expected numbers in (0, 100), e.g. 50,99"
        )
    flags["percentile_metrics"] = [PERCENTILE_METRICS[m] for m in names]
    flags["metric_percentiles"] = qs


def _vllm_line(v: dict[str, Any]) -> bool:
    """True when a flag only vLLM has was given: the line was written for vLLM."""
    return any(val not in (None, False, 0.0) for val in v.values())


def apply_vllm_flags(flags: dict[str, Any]) -> None:
    """Replace the vLLM flags in ``flags`` (the bench command's parameters) by the
    settings they mean; one ConfigError line for a flag that cannot be honoured."""
    v = {name: flags.pop(name) for name in _OPTIONS}
    _url(flags, v["base_url"], v["host"], v["port"])
    _endpoint(flags, v["backend"], flags.get("endpoint"))
    _dataset(
        flags,
        v["dataset_name"],
        v["dataset_path"],
        v["random_input_len"],
        v["random_output_len"],
        v["random_range_ratio"],
    )
    _percentiles(flags, v["percentile_metrics"], v["metric_percentiles"])
    if v["request_rate"] is not None:
        if flags.get("rate") or flags.get("poisson"):
            raise ConfigError("give --request-rate or --rate/--poisson, not two of them")
        flags["poisson"] = v["request_rate"]  # vLLM's arrivals: Poisson, gamma with --burstiness
    elif _vllm_line(v) and not any(flags.get(k) for k in _LOAD_FLAGS):
        flags["rate"] = "inf"  # a vLLM command line without a rate: vLLM's default
    if v["save_result"]:
        if flags.get("out") is not None:
            raise ConfigError("give --out or --save-result, not both")
        flags["out"] = v["result_dir"] or Path(".")
        flags["result_filename"] = v["result_filename"]
    elif v["result_dir"] or v["result_filename"]:
        raise ConfigError("--result-dir/--result-filename go with --save-result")
