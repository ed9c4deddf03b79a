"""GuideLLM and infersight measure the same server: do they get the same verdict and fix?

For each scenario, infersight's fake server (a real HTTP server on 127.0.0.1 with a known
slot limit or compute knee) is measured twice at the same concurrencies and request
counts: by GuideLLM (its own venv, ``scripts/setup.sh --tools``), whose benchmarks JSON
infersight imports, and by ``infersight bench``. Both are diagnosed; the table shows
each one's verdict, the knob and number of its fix, and the figures the fix rests on,
side by side, and whether they agree (infersight_testkit.agreement: the same verdict,
knob, direction and fitted model, fix numbers within one).

    .venv/bin/python benchmarks/import_agreement.py          # about two minutes
    .venv/bin/python benchmarks/import_agreement.py --requests 48
    .venv/bin/python benchmarks/import_agreement.py --busy 3 --repeat 3   # a busy host
    .venv/bin/python benchmarks/import_agreement.py --ours-only --busy 3 --repeat 10

``--busy N`` keeps N processes spinning on the CPU throughout (client, server and tool
share the cores with them, as on a loaded CI machine); ``--repeat K`` measures every
scenario K times and counts the agreements.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from infersight.bench import BenchConfig
from infersight.core.records import RunResult
from infersight.diagnose import diagnose_run
from infersight.entrypoints.bench import bench_and_diagnose
from infersight.importers import import_file
from infersight_testkit.agreement import Advice, advice, disagreements
from infersight_testkit.fake.openai import FakeConfig, FakeOpenAI
from infersight_testkit.tool_runs import run_guidellm, tool_path


@dataclass
class Scenario:
    name: str
    server: dict[str, Any]
    levels: list[int]
    truth: str  # the verdict the server's structure calls for


SCENARIOS = [
    Scenario("4 slots", dict(ttft=0.05, itl=0.01, tokens=16, slots=4), [1, 4, 8], "slot_bound"),
    Scenario("8 slots", dict(ttft=0.05, itl=0.01, tokens=16, slots=8), [2, 8, 16], "slot_bound"),
    Scenario(
        "compute knee 4",
        dict(ttft=0.05, itl=0.01, tokens=16, compute_knee=4),
        [1, 4, 8],
        "compute_bound",
    ),
]


def _row(tool: str, run: RunResult, adv: Advice, seconds: float) -> list[str]:
    curve = diagnose_run(run).curve
    agg = run.aggregates[list(run.aggregates)[-1]]
    number = "" if adv.number is None else f" {adv.number:g}"
    basis = f" ({adv.basis})" if adv.basis and adv.number is not None else ""
    return [
        tool,
        adv.verdict or "-",
        f"{adv.knob or '-'} {adv.direction}{number}{basis}",
        "-" if adv.model_slots is None else f"{adv.model_slots:g}",
        f"{curve.capacity:.1f}" if curve is not None and curve.capacity else "-",
        f"{agg['ttft']['p50'] * 1000:.0f}",
        f"{agg['tpot']['p50'] * 1000:.1f}",
        f"{seconds:.0f}",
    ]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=32, help="requests per level")
    ap.add_argument("--busy", type=int, default=0, help="processes spinning on the CPU")
    ap.add_argument("--repeat", type=int, default=1, help="measurements of each scenario")
    ap.add_argument(
        "--ours-only", action="store_true", help="infersight's bench alone (no GuideLLM run)"
    )
    args = ap.parse_args()
    if tool_path("guidellm") is None and not args.ours_only:
        print("guidellm is not installed: run scripts/setup.sh --tools", file=sys.stderr)
        return 2
    busy = f", {args.busy} busy processes" if args.busy else ""
    table = Table(title=f"GuideLLM vs infersight bench, {args.requests} requests a level{busy}")
    for col in (
        "scenario",
        "levels",
        "measured by",
        "verdict",
        "fix",
        "model slots",
        "capacity req/s",
        "TTFT p50 ms (top)",
        "TPOT p50 ms",
        "s",
        "agree",
    ):
        table.add_column(col)
    spin = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)]
    agreed = (0, 0)
    try:
        with tempfile.TemporaryDirectory() as d:
            agreed = _measure(args, table, Path(d))
    finally:
        for p in spin:
            p.kill()
            p.wait()
    Console(width=200).print(table)
    if not args.ours_only:
        print(f"agree: {agreed[0]} of {args.repeat * len(SCENARIOS)}")
    print(f"infersight's own verdict right: {agreed[1]} of {args.repeat * len(SCENARIOS)}")
    return 0


def _measure(args: argparse.Namespace, table: Table, d: Path) -> tuple[int, int]:
    """Every scenario ``args.repeat`` times, a pair of rows each; the agreements, and
    how often infersight's own run got the verdict the server's structure calls for."""
    agreed = right = 0
    for i in range(args.repeat * len(SCENARIOS)):
        sc = SCENARIOS[i % len(SCENARIOS)]
        cfg = FakeConfig(**sc.server, metrics_dialect="vllm")
        out = Path(d) / f"s{i}" / "benchmarks.json"
        out.parent.mkdir()
        with FakeOpenAI.subprocess(cfg) as srv:
            t = time.perf_counter()
            if not args.ours_only:
                run_guidellm(
                    srv.base_url,
                    out,
                    streams=sc.levels,
                    requests=args.requests,
                    tokens=sc.server["tokens"],
                )
            t_g = time.perf_counter() - t
            t = time.perf_counter()
            ours = bench_and_diagnose(
                BenchConfig(
                    url=srv.base_url,
                    concurrency=sc.levels,
                    requests=args.requests,
                    max_tokens=sc.server["tokens"],
                    input_tokens="fixed:16",
                    progress=False,
                    diagnose=False,
                )
            )
            t_o = time.perf_counter() - t
        levels = ",".join(map(str, sc.levels))
        a_o = advice(diagnose_run(ours))
        if args.ours_only:
            table.add_row(sc.name, levels, *_row("infersight", ours, a_o, t_o), "-")
            right += a_o.verdict == sc.truth
            continue
        theirs = import_file(out)
        a_g = advice(diagnose_run(theirs))
        differ = disagreements(a_g, a_o)
        table.add_row(
            sc.name,
            levels,
            *_row("GuideLLM", theirs, a_g, t_g),
            "yes" if not differ else "NO: " + "; ".join(differ),
        )
        table.add_row("", "", *_row("infersight", ours, a_o, t_o), "")
        agreed += not differ
        right += a_o.verdict == sc.truth
    return agreed, right


if __name__ == "__main__":
    raise SystemExit(main())
