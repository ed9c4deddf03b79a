"""False queues on an engine with idle slots, on real runs of the embedded engine.

Each run is the suite's sweep: c=1, 4 and 8 on the embedded engine with 8 slots, 8
requests a level, 16-token prompts and 32 tokens each. No level can queue: there are
never more users than slots. For every level the script counts:

- handover scrapes: scrapes where the client had more requests in flight than the
  engine listed running or waiting (a request is in llama.cpp's HTTP front, being read
  and tokenized, or its answer is on its way back);
- false queues: a queueing verdict (slot-bound, KV-bound or capacity) at a level whose
  engine never listed a request waiting.

``--hog N`` runs N busy processes beside the engine, as on a loaded CI box. Runs are
saved under ``--out``; ``--from DIR`` only re-diagnoses the runs saved there, so two
versions of the diagnosis can be compared on the same runs.

    .venv/bin/python benchmarks/diagnose_false_queues.py --runs 10 --hog 2 --out /tmp/fq
    .venv/bin/python benchmarks/diagnose_false_queues.py --from /tmp/fq
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from infersight.core.records import RunResult, load_run_result, save_run_result
from infersight.diagnose import diagnose

SLOTS = 8
QUEUES = {"slot_bound", "kv_bound", "capacity"}


def record_runs(runs: int, hog: int, out: Path, con: Console) -> list[Path]:
    from infersight.bench import BenchConfig
    from infersight.engine import EmbeddedEngine
    from infersight.entrypoints.bench import bench_and_diagnose

    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(hog)]
    paths = []
    try:
        with EmbeddedEngine(parallel=SLOTS, ctx=SLOTS * 1024) as eng:
            cfg = BenchConfig(
                url=eng.base_url,
                concurrency=[1, 4, SLOTS],
                requests=8,
                max_tokens=32,
                input_tokens="fixed:16",
                ignore_eos=True,
                progress=False,
                warmup="0",
                cooldown="0",
                diagnose=False,
            )
            for i in range(runs):
                p = save_run_result(bench_and_diagnose(cfg), out / f"run{i:03d}.json")
                con.print(f"run {i + 1}/{runs}: {p}")
                paths.append(p)
    finally:
        for h in hogs:
            h.kill()
    return paths


@dataclass
class LevelRow:
    level: str
    scrapes: int
    handovers: int
    waiting_max: float
    queue: list[str]


def level_figures(run: RunResult) -> list[LevelRow]:
    """Per level with at most SLOTS users: scrapes, handover scrapes, the engine's
    largest waiting count, and the queueing verdicts the diagnosis gives it."""
    verdicts = diagnose(run)
    rows = []
    for level in dict.fromkeys(str(r.labels.get("level")) for r in run.records):
        users = int(level.split("=")[1])
        recs = [r for r in run.records if r.labels.get("level") == level and r.sent is not None]
        if users > SLOTS or not recs:
            continue
        t0 = min(r.sent for r in recs if r.sent is not None)
        t1 = max(r.end or t0 for r in recs)
        by_t: dict[float, dict[str, float]] = {}
        for s in run.samples:
            if (
                t0 <= s.t <= t1
                and s.value is not None
                and s.name in ("engine.requests_running", "engine.requests_waiting")
            ):
                by_t.setdefault(s.t, {})[s.name] = float(s.value)
        handovers = 0
        for t, v in by_t.items():
            client = sum(1 for r in recs if r.sent is not None and r.sent <= t < (r.end or t1))
            seen = v.get("engine.requests_running", 0.0) + v.get("engine.requests_waiting", 0.0)
            handovers += client > seen
        waiting = max((v.get("engine.requests_waiting", 0.0) for v in by_t.values()), default=0.0)
        queue = sorted({v.id for v in verdicts if v.level == level} & QUEUES)
        rows.append(LevelRow(level, len(by_t), handovers, waiting, queue))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--hog", type=int, default=2, help="busy processes beside the engine")
    ap.add_argument("--out", type=Path, default=Path("/tmp/infersight-false-queues"))
    ap.add_argument("--from", dest="src", type=Path, help="re-diagnose the runs saved here")
    a = ap.parse_args()
    con = Console(width=140)
    paths = sorted(a.src.glob("run*.json")) if a.src else record_runs(a.runs, a.hog, a.out, con)
    totals: dict[str, list[int]] = {}
    for p in paths:
        for row in level_figures(load_run_result(p)):
            t = totals.setdefault(row.level, [0, 0, 0, 0, 0])
            t[0] += 1
            t[1] += row.scrapes
            t[2] += row.handovers
            t[3] += row.waiting_max == 0.0 and bool(row.queue)
            t[4] += bool(row.queue)
    table = Table(
        title=f"{len(paths)} runs, {SLOTS} slots: queueing verdicts where no level can queue"
    )
    for col in (
        "level",
        "runs",
        "scrapes",
        "handover scrapes",
        "false queues (engine listed none)",
        "queue verdicts",
    ):
        table.add_column(col, justify="right")
    for level, t in totals.items():
        table.add_row(level, *(str(x) for x in t))
    con.print(table)


if __name__ == "__main__":
    main()
