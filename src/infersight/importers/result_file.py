"""Result files as ``diagnose`` and ``report`` read them: an infersight RunResult, or
another tool's result (GuideLLM, AIPerf, vLLM, inference-perf, an llm-d benchmark
report), told apart by content.
"""

from __future__ import annotations

from pathlib import Path

from infersight.core.errors import ConfigError, file_error
from infersight.core.records import RunResult
from infersight.importers.detect import detect, import_bytes

__all__ = ["load_result", "load_results"]


def load_result(path: str | Path) -> RunResult:
    """One result file; every problem is one ConfigError line naming the file (and,
    for another tool's file, the format its content showed and what is wrong)."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as e:
        raise file_error(p, e) from None
    fmt = detect(data)
    if fmt is not None:
        return import_bytes(data, str(p), fmt)
    try:
        return RunResult.from_json_bytes(data)
    except ConfigError as e:
        raise ConfigError(
            f"{p}: not a valid infersight RunResult ({e}), nor a GuideLLM, AIPerf, vLLM, "
            "inference-perf or llm-d benchmark report result"
        ) from None


def load_results(paths: list[Path]) -> list[RunResult]:
    """Several result files, in order (the first is a comparison's baseline)."""
    return [load_result(p) for p in paths]
