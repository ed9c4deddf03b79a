"""The first-token reading (docs/design.md section 9): the model's held-out self-check
with prompts read as prefilled in batches where the run shows it (the model's choice),
side by side with the reference, every prompt prefilled on its own (the reading before
it), on the same runs.

With no run given, it runs the README's main job first (the embedded engine,
``bench --sweep closed --requests 32 --max-tokens 48``) into a temporary folder:

    .venv/bin/python benchmarks/prefill_reading.py                  # about 70 s
    .venv/bin/python benchmarks/prefill_reading.py runs/demo/result.json /tmp/vt/src2.json

Prints, per run and per reading, the prefill mode fitted on all levels and the
leave-one-level-out error of throughput, TTFT p50 and TPOT p50 (MAPE, and per level).
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
from rich.console import Console
from rich.table import Table

import infersight.servermodel.first_token as fitting
from infersight.bench import BenchConfig
from infersight.core.records import load_run_result
from infersight.core.server_model import CHECKED_METRICS
from infersight.entrypoints.bench import bench_and_diagnose
from infersight.servermodel import fit_model, run_data, self_check


def _own_prompt(start: Any, first: Any, prompt: np.ndarray, tol: float) -> np.ndarray:
    """The reference: every request's batch is its own prompt (no batched reading)."""
    return np.where(np.isfinite(prompt), prompt, 0.0)


READINGS = {"model (batched where the run shows it)": None, "each prompt alone": _own_prompt}


def _demo(out: Path) -> Path:
    cfg = BenchConfig(
        sweep="closed", requests=32, max_tokens=48, out=str(out), progress=False, diagnose=True
    )
    bench_and_diagnose(cfg)
    return out / "result.json"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="*", type=Path, help="result.json files (default: a demo run)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        runs = args.runs or [_demo(Path(tmp) / "demo")]
        table = Table(title="held-out self-check: batched prefill vs each prompt alone")
        for col in ("run", "reading", "mode", *CHECKED_METRICS, "per level (TTFT p50)"):
            table.add_column(col)
        for path in runs:
            d = run_data(load_run_result(path))
            for name, reading in READINGS.items():
                with contextlib.ExitStack() as stack:
                    if reading is not None:
                        stack.enter_context(mock.patch.object(fitting, "prefilled_during", reading))
                    m = fit_model(d)
                    sc = self_check(d, m)
                errs = [f"{(sc.mape.get(k) or 0):.0%}" for k in CHECKED_METRICS]
                levels = ", ".join(
                    f"{c.level} {(c.error.get('ttft_p50') or 0):.0%}" for c in sc.levels
                )
                table.add_row(str(path), name, m.prefill_mode, *errs, levels)
        Console(width=160).print(table)


if __name__ == "__main__":
    main()
