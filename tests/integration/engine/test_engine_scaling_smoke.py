"""The scaling benchmark's measuring loop, run briefly against the real engine."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from infersight.client import Client

pytestmark = pytest.mark.engine

_SCRIPT = Path(__file__).resolve().parents[3] / "benchmarks" / "engine_scaling.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("engine_scaling_bench", _SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(mod)
    return mod


async def test_level_counts_tokens_in_window_and_client_cpu(engine: Any) -> None:
    bench = _load()
    async with Client(engine.base_url) as client:
        lvl = await bench.run_level(
            client, 2, warmup=0.5, duration=2.0, max_tokens=8, engine_pid=engine.pid
        )
    assert lvl.concurrency == 2 and lvl.window == pytest.approx(2.0)
    assert lvl.tokens_in_window > 0 and lvl.tok_s > 0
    assert lvl.chunks >= lvl.tokens_in_window  # every token came in a streamed chunk
    assert lvl.us_per_chunk is not None and lvl.us_per_chunk > 0
    assert lvl.engine_cpu_s is not None and lvl.engine_cpu_s > 0
    assert not lvl.errors
