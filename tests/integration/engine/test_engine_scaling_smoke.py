"""The scaling benchmark's measuring loop, run briefly against the real engine."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import psutil
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


def test_raw_and_busy_sides_print_ratios_per_level(capsys: pytest.CaptureFixture[str]) -> None:
    bench = _load()
    code = bench.main(
        [
            "--raw",
            "--busy",
            "--concurrency",
            "1",
            "--duration",
            "2",
            "--warmup",
            "0.5",
            "--rounds",
            "1",
            "--max-tokens",
            "8",
            "--parallel",
            "2",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    # Both servers ran: the raw one with llama.cpp's own thread choice and wait policy.
    assert "== raw llama.cpp" in out and "omp_wait=unset (libgomp default)" in out
    assert re.search(r"threads=\d+", out.split("== raw llama.cpp")[1])
    rows = {
        m.group(1).strip(): m
        for m in re.finditer(
            r"^\s+1 (infersight|raw llama.cpp)\s+([\d.]+)\s+([\d.]*)\s+([\d.]+)\s+([\d.]+)",
            out,
            re.M,
        )
    }
    assert set(rows) == {"infersight", "raw llama.cpp"}, out
    # A loaded test machine may starve the raw side (its spinning threads collapse
    # there), so only ours must have made progress; the ratios are printed either way.
    assert float(rows["infersight"].group(2)) > 0 and float(rows["raw llama.cpp"].group(2)) >= 0
    assert re.search(r"infersight: infersight/raw c=1 (\d+\.\d\d|-)", out)
    assert re.search(r"infersight: busy/quiet c=1 \d+\.\d\d", out)
    # No server is left behind (a frozen one would linger stopped).
    assert not [
        p
        for p in psutil.process_iter(["cmdline"])
        if "--raw-server" in " ".join(p.info["cmdline"] or [])
    ]
