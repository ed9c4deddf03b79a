"""The RunResult's closing: its flat configuration, versions, host, the client-limited
flag, the notes of a stopped run and of approximate prompts, cache hits and cost."""

from __future__ import annotations

import contextlib
import os
import platform
from importlib import metadata
from typing import Any

from infersight import __version__
from infersight.bench.datasets import PromptSource
from infersight.bench.level.order import LevelOrder
from infersight.bench.stop import Stop
from infersight.bench.target import Target
from infersight.core.interrupts import stop_text
from infersight.core.records import RunResult
from infersight.stats.cost import price_run
from infersight.stats.prefix_cache import add_engine_cache

__all__ = ["finish_result"]


def finish_result(
    result: RunResult,
    flat: dict[str, Any],
    target: Target,
    prompts: PromptSource,
    order: LevelOrder,
    levels_done: list[dict[str, Any]],
    stop: Stop,
) -> None:
    """Complete ``result``; ``flat`` is the configuration as the user gave it (every
    field, flat, without the API key's source): the RunResult keeps it so."""
    result.config = {
        **flat,
        "api_key": "set" if target.api_key else "none",
        "model": target.model,
        "endpoint_path": target.path,
        "mode": order.mode,
        "levels": levels_done,
        "engine": target.engine_info,
        "workload": prompts.desc,
    }
    fm = order.summary()
    if fm is not None:
        result.config["find_max"] = fm
    result.versions = _versions(__version__)
    result.environment = {
        **result.environment,
        "host": platform.node(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "loadgen_pid": os.getpid(),
        "engine_pid": target.engine_pid,
    }
    reasons = []
    for name, agg in result.aggregates.items():
        reasons += [f"{name}: {r}" for r in agg["client_limited"]["reasons"]]
    result.client_limited = bool(reasons)
    result.client_limited_reasons = reasons
    if stop.stop:
        result.partial = True
        n_cancel = sum(1 for r in result.records if r.cancelled)
        result.notes.append(
            f"{stop_text(stop.signal)} during level {stop.during or '?'}: scheduling stopped, "
            f"{n_cancel} request(s) still in flight after the grace period were cancelled"
        )
    if not prompts.desc.get("lengths_exact", True):
        result.notes.append("prompt lengths are approximate: " + prompts.desc["lengths_note"])
    if "note" in prompts.desc:
        result.notes.append(prompts.desc["note"])
    add_engine_cache(result)  # the engine's prefix-cache hit rate, per level
    price_run(result)  # from the flags, --prices or the price table (config above)


def _versions(ours: str) -> dict[str, str]:
    out = {"infersight": ours, "python": platform.python_version()}
    for pkg in ("aiohttp", "uvloop", "numpy", "xllamacpp"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            out[pkg] = metadata.version(pkg)
    return out
