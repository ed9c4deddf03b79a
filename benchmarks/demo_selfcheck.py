"""The README's main job, and the model's held-out self-check on it (docs/design.md
section 9): the demo's workload (prompt and answer lengths drawn from ranges) side by
side with the reference, every request alike (one prompt, max_tokens 48: the demo
before it), on the embedded engine, alternating in one run.

    .venv/bin/python benchmarks/demo_selfcheck.py              # 2 rounds, about 8 min
    .venv/bin/python benchmarks/demo_selfcheck.py --rounds 1

Identical requests start and end together, so each level's medians fall either on the
answers of a wave or on those out of step with it; lengths that differ, as a real
workload's do, let the levels settle. Prints, per run, the self-check's mean held-out
error of throughput, TTFT p50 and TPOT p50 (goal 10% / 15% / 15%), whether the model
is trusted, and the run's verdict.
"""

from __future__ import annotations

import argparse

from rich.console import Console
from rich.table import Table

from infersight.bench import BenchConfig
from infersight.core.server_model import CHECKED_METRICS
from infersight.entrypoints.bench import bench_and_diagnose

#: The workloads compared: scripts/demo.sh's flags, as BenchConfig fields.
WORKLOADS: dict[str, dict[str, object]] = {
    "demo (lengths in ranges)": {
        "input_tokens": "uniform:24:104",
        "output_tokens": "uniform:16:80",
    },
    "reference (every request alike)": {"max_tokens": 48},
}


def _run(flags: dict[str, object]) -> list[str]:
    cfg = BenchConfig(sweep="closed", requests=32, progress=False, diagnose=True, **flags)
    res = bench_and_diagnose(cfg)
    sc = res.self_check
    errs = [f"{(sc.mape.get(k) or 0):.0%}" if sc else "-" for k in CHECKED_METRICS]
    rec = res.recommendation
    verdict = rec.verdict if rec else "-"
    levels = ", ".join(res.aggregates)
    return [*errs, "yes" if sc and sc.trusted else "no", levels, str(verdict)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=2, help="runs of each workload")
    args = ap.parse_args()
    table = Table(title="the demo's self-check, held out (goal 10% / 15% / 15%)")
    for col in ("round", "workload", *CHECKED_METRICS, "trusted", "levels", "verdict"):
        table.add_column(col)
    for r in range(args.rounds):
        for name, flags in WORKLOADS.items():
            table.add_row(str(r + 1), name, *_run(flags))
    Console(width=160).print(table)


if __name__ == "__main__":
    main()
