"""Prefill that binds: fake servers that prefill the prompts admitted together in one
step (``FakeConfig.batch_prefill``, as vLLM and llama.cpp do), benched by a real
``bench``, and the model's limiter, fix and fitted slots beside the reference: the same
saved runs read by another revision's src (``--baseline REV``, before the prefill rule of
``servermodel.binding``, design section 9). The cases vary what the rule was not built
on: prompt length, mixed prompts, open loop below and past the prefill's capacity, and
each prompt prefilled alone (where prefill never binds).

    .venv/bin/python benchmarks/prefill_bound.py [--only NAME,...] [--keep DIR] [--baseline REV]
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
from infersight.bench import BenchConfig
from infersight.core.records import RunResult, load_run_result, save_run_result
from infersight.diagnose.model_advice import model_advice
from infersight.entrypoints.bench import bench_and_diagnose
from infersight_testkit import FakeOpenAI
from infersight_testkit.fake.config import FakeConfig

_CLOSED = {"max_tokens": 32, "duration": 4.0, "concurrency": [1, 2, 4, 8]}
_OPEN = {"arrival": "poisson", "input_tokens": "fixed:100", "max_tokens": 32, "duration": 6.0}


def _srv(**kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "ttft": 0.02,
        "itl": 0.01,
        "tokens": 32,
        "slots": 8,
        "metrics_dialect": "vllm",
        "batch_prefill": True,
    }
    # FakeConfig's fields, made into one only to bench (a baseline's src may lack some)
    return {**base, **kw}


#: (name, server, load, the limiter that binds at the most loaded level, why)
CASES: list[tuple[str, dict[str, Any], dict[str, Any], str, str]] = [
    (
        "closed_100",
        _srv(prefill_per_token=1e-3),
        {**_CLOSED, "input_tokens": "fixed:100"},
        "compute",
        "prefill 0.1 s a prompt: 10 req/s at most, decode 18",
    ),
    (
        "closed_200",
        _srv(prefill_per_token=1e-3),
        {**_CLOSED, "input_tokens": "fixed:200"},
        "compute",
        "prefill 0.2 s a prompt: 5 req/s at most",
    ),
    (
        "closed_mixed",
        _srv(prefill_per_token=1e-3),
        {**_CLOSED, "input_tokens": "uniform:20:180"},
        "compute",
        "prompts 20..180 tokens, 0.1 s a prompt on average",
    ),
    (
        "open_past",
        _srv(prefill_per_token=1e-3),
        {**_OPEN, "rate": [3.0, 6.0, 14.0]},
        "compute",
        "14 req/s offered, 10 served at most",
    ),
    (
        "open_below",
        _srv(prefill_per_token=1e-3),
        {**_OPEN, "rate": [1.0, 2.0, 4.0]},
        "none",
        "4 req/s offered, 10 possible: throughput keeps pace",
    ),
    (
        "closed_each",
        _srv(prefill_per_token=1e-3, batch_prefill=False),
        {**_CLOSED, "input_tokens": "fixed:100"},
        "none",
        "each prompt prefilled alone, in parallel: 8 slots never fill",
    ),
]


def reading(run: RunResult) -> dict[str, Any]:
    """The model's limiter, fix and fitted slots for a run (this checkout's, or with
    ``PYTHONPATH`` at a baseline's src, that revision's)."""
    adv = model_advice(run)
    fix = adv.fix
    turn = f"{fix.knob} {fix.turns()}" if fix is not None and fix.knob else "-"
    m, sc = adv.model, adv.check
    return {
        "limiter": adv.limiter or "no model",
        "fix": turn,
        "slots": None if m is None else m.slots.value,
        "ttft": None if sc is None else sc.mape.get("ttft_p50"),
    }


def _bench(case: tuple[str, dict[str, Any], dict[str, Any], str, str], folder: Path) -> Path:
    name, server, load, _, _ = case
    path = folder / f"{name}.json"
    if not path.is_file():
        with FakeOpenAI.subprocess(FakeConfig(**server)) as srv:
            cfg = BenchConfig(url=srv.base_url, progress=False, diagnose=True, **load)
            save_run_result(bench_and_diagnose(cfg), path)
    return path


def _cell(r: dict[str, Any]) -> str:
    slots = "" if r["slots"] is None else f", {r['slots']:g} slots"
    return f"{r['limiter']} ({r['fix']}{slots})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="", help="comma-separated case names")
    ap.add_argument("--keep", type=Path, help="folder for the runs (kept; reused if there)")
    ap.add_argument("--baseline", help="also read the runs with this revision's src")
    ap.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    only = {n for n in a.only.split(",") if n}
    picked = [c for c in CASES if not only or c[0] in only]
    folder = a.keep or Path(tempfile.mkdtemp(prefix="prefill-bound-"))
    folder.mkdir(parents=True, exist_ok=True)
    paths = {c[0]: _bench(c, folder) for c in picked}
    ours = {n: reading(load_run_result(p)) for n, p in paths.items()}
    if a.json:
        print(json.dumps(ours))
        return
    base: dict[str, dict[str, Any]] = {}
    if a.baseline:
        args = ["--keep", str(folder), "--only", ",".join(paths), "--json"]
        base = read_at(a.baseline, __file__, args)
    t = Table(title="prefill that binds: the model's limiter (fix, fitted slots)")
    for col in (
        "case",
        "binds",
        "this checkout",
        a.baseline or "-",
        "TTFT err",
        "top level",
        "why",
    ):
        t.add_column(col)
    right = [0, 0]
    for name, _, _, truth, why in picked:
        r, b = ours[name], base.get(name)
        right[0] += r["limiter"] == truth
        right[1] += b is not None and b["limiter"] == truth
        agg = list(load_run_result(paths[name]).aggregates.items())[-1]
        level = f"{agg[0]}: {agg[1].get('request_throughput', 0):.1f} req/s"
        err = "-" if r["ttft"] is None else f"{r['ttft']:.0%}"
        t.add_row(name, truth, _cell(r), _cell(b) if b else "-", err, level, why)
    Console(width=190).print(t)
    print(f"right: {right[0]} of {len(picked)}" + (f"; {a.baseline}: {right[1]}" if base else ""))
    print(f"runs in {folder}")


if __name__ == "__main__":
    main()
