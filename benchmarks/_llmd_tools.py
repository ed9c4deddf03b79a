"""The four harnesses' results for benchmarks/llmd_roundtrip.py: each tool run for real
against a server on 127.0.0.1 at three settings, its native file(s) and the package's
conversion of each (``llmd_benchmark_report.native_to_br0_2``'s ``import_*``), written
as YAML as the package's CLI writes them.

vLLM's benchmark (``tool_runs.run_vllm_bench``) runs from a Python with vLLM installed
(``--vllm-python``; by default ``.tool-venvs/vllm``). It saves e2e statistics only when
asked (``--percentile-metrics ...,e2el``); the package's converter needs them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from llmd_benchmark_report import native_to_br0_2 as convert

from infersight_testkit.tool_runs import (
    run_aiperf,
    run_guidellm,
    run_inference_perf,
    run_vllm_bench,
    tool_path,
    tool_venvs,
    word_tokenizer,
)

__all__ = ["TOOLS", "Setting", "default_vllm_python"]


@dataclass
class Setting:
    """One setting of one tool: its native file and the package's report of it."""

    tool: str
    concurrency: int
    native: Path
    converted: Path


def _yaml(report: object, path: Path) -> Path:
    report.export_yaml(str(path))  # type: ignore[attr-defined]
    return path


def default_vllm_python() -> Path:
    return tool_venvs() / "vllm" / "bin" / "python"


def guidellm(url: str, d: Path, levels: list[int], requests: int, _: Path) -> list[Setting]:
    native = run_guidellm(url, d / "benchmarks.json", streams=levels, requests=requests, tokens=16)
    reports = convert.import_guidellm_all(str(native))
    return [
        Setting("guidellm", c, native, _yaml(rep, d / f"br_guidellm_{c}.yaml"))
        for c, rep in zip(levels, reports, strict=True)
    ]


def aiperf(url: str, d: Path, levels: list[int], requests: int, _: Path) -> list[Setting]:
    out = []
    for c in levels:
        folder = run_aiperf(url, d / f"aiperf-{c}", concurrency=c, requests=requests)
        native = next(folder.rglob("profile_export_aiperf.json"))
        rep = convert.import_aiperf(str(native))
        out.append(Setting("aiperf", c, native, _yaml(rep, d / f"br_aiperf_{c}.yaml")))
    return out


def inference_perf(url: str, d: Path, levels: list[int], requests: int, _: Path) -> list[Setting]:
    stages = [(requests, c) for c in levels]
    folder = run_inference_perf(url, d / "inference-perf", stages=stages, tokens=16)
    files = sorted(folder.rglob("stage_*_lifecycle_metrics.json"))
    return [
        Setting(
            "inference-perf",
            c,
            f,
            _yaml(convert.import_inference_perf(str(f)), d / f"br_inference_perf_{c}.yaml"),
        )
        for c, f in zip(levels, files, strict=True)
    ]


def vllm(url: str, d: Path, levels: list[int], requests: int, python: Path) -> list[Setting]:
    out = []
    for c in levels:
        native = run_vllm_bench(
            url,
            d / f"vllm_c{c}.json",
            model="fake",
            tokenizer=word_tokenizer(d / "vllm-tok"),
            prompts=requests,
            input_len=16,
            output_len=16,
            max_concurrency=c,
        )
        rep = convert.import_vllm_benchmark(str(native))
        out.append(Setting("vllm bench serve", c, native, _yaml(rep, d / f"br_vllm_{c}.yaml")))
    return out


#: name -> (is it installed?, its runner).
TOOLS: dict[str, tuple[Callable[[Path], bool], Callable[..., list[Setting]]]] = {
    "guidellm": (lambda _: tool_path("guidellm") is not None, guidellm),
    "aiperf": (lambda _: tool_path("aiperf") is not None, aiperf),
    "inference-perf": (lambda _: tool_path("inference-perf") is not None, inference_perf),
    "vllm": (lambda py: py.is_file(), vllm),
}
