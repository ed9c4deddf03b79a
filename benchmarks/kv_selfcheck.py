"""The model's held-out self-check under KV preemption on real vLLM (docs/design.md
section 9): a server with 16 sequences stated and KV for about 8 (16 blocks of 128
tokens, ``--enforce-eager``), swept closed (c=1, 2, 4, ... with the 16 slots full), with
prompts and answers of mixed lengths and with every request alike (200 + 64 tokens).
Each run is read by this checkout and, with ``--baseline REV``, by that revision's
``src`` side by side (before the KV replay took the stated slots into account).

    .venv/bin/python benchmarks/kv_selfcheck.py --keep runs/kv --baseline d7efafc  # ~9 min
    .venv/bin/python benchmarks/kv_selfcheck.py --keep runs/kv --baseline d7efafc  # reuses

Prints, per run and per reading, the prompt cost per token the first-token fit reads
and the self-check's mean held-out error of throughput, TTFT p50 and TPOT p50 (goal 10%
/ 15% / 15%; the c=1 level shown but not counted).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from _baseline import read_at
from infersight.core.records import load_run_result, save_run_result
from infersight.core.server_model import CHECKED_METRICS
from infersight.servermodel import fit_model, run_data, self_check
from infersight_testkit.vllm_server import VLLMServer
from vllm_truth import KV, bench

#: The workloads: BenchConfig fields beside the sweep.
WORKLOADS: dict[str, dict[str, Any]] = {
    "mixed": {"input_tokens": "uniform:150:250", "output_tokens": "uniform:32:96"},
    "alike": {"input_tokens": "fixed:200", "max_tokens": 64},
}


def _measure(folder: Path) -> None:
    """Start vLLM once and sweep each workload not yet in ``folder``."""
    todo = [n for n in WORKLOADS if not (folder / f"{n}.json").is_file()]
    if not todo:
        return
    with VLLMServer(KV) as server:
        for name in todo:
            run = bench(server, sweep="closed", requests=16, engine_slots=16, **WORKLOADS[name])
            save_run_result(run, folder / f"{name}.json")


def reading(path: Path) -> dict[str, Any]:
    """The first-token prompt cost and the self-check of a run, as this ``src`` reads it."""
    d = run_data(load_run_result(path))
    m = fit_model(d)
    sc = self_check(d, m)
    return {"c_first": m.c_first.value, **{k: sc.mape.get(k) for k in CHECKED_METRICS}}


def _row(r: dict[str, Any]) -> list[str]:
    pct = [f"{r[k]:.0%}" if r.get(k) is not None else "-" for k in CHECKED_METRICS]
    return [f"{(r['c_first'] or 0) * 1000:.2f} ms", *pct]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keep", type=Path, help="folder for the runs (kept; reused if there)")
    ap.add_argument("--baseline", help="also read the runs with this revision's src")
    ap.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    folder = a.keep or Path(tempfile.mkdtemp(prefix="kv-selfcheck-"))
    folder.mkdir(parents=True, exist_ok=True)
    if not a.json:
        _measure(folder)
    ours = {n: reading(folder / f"{n}.json") for n in WORKLOADS}
    if a.json:
        print(json.dumps(ours))
        return
    base: dict[str, dict[str, Any]] = {}
    if a.baseline:
        base = read_at(a.baseline, __file__, ["--keep", str(folder), "--json"])
    t = Table(title="self-check under KV preemption, real vLLM (goal 10% / 15% / 15%)")
    for col in ("workload", "reading", "prompt cost a token", *CHECKED_METRICS):
        t.add_column(col)
    for name in WORKLOADS:
        t.add_row(name, "this checkout", *_row(ours[name]))
        if name in base:
            t.add_row(name, a.baseline, *_row(base[name]))
    Console(width=160).print(t)
    print(f"runs in {folder}")


if __name__ == "__main__":
    main()
