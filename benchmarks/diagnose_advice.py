"""Demo advice: does each run's one fix agree with the run's own levels?

Every scenario of issue 22 runs as ``bench`` against infersight's fake server in its own
process (a real HTTP server on 127.0.0.1 whose slot limit and compute knee are known),
then ``diagnose`` gives the run's recommendation. Per scenario the table shows the
verdict and the number in the fix beside what the capacity curve says (its knee or
plateau) and what the server's truth asks for, and whether the fix agrees with both.

``--demo FILE`` also checks a saved run (``bash scripts/demo.sh`` writes
runs/demo/result.json): its curve, its fix, and that the fix agrees with the table
(no slot raise past a measured compute knee, never above 2 x the knee, replicas when
the load needs more than one server).

    .venv/bin/python benchmarks/diagnose_advice.py            # about a minute
    .venv/bin/python benchmarks/diagnose_advice.py --demo runs/demo/result.json
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from infersight.core.curve import CapacityCurve, Recommendation
from infersight.core.records import RunResult, load_run_result
from infersight.diagnose import diagnose_run

SERVICE = dict(ttft=0.2, itl=0.01, tokens=5)  # about 0.24 s a request


@dataclass
class Scenario:
    name: str
    server: dict[str, Any]
    bench: dict[str, Any]
    truth: str
    #: Does the recommendation agree with the server's truth?
    check: Callable[[Recommendation, CapacityCurve | None], bool]
    scrape: bool = True
    notes: list[str] = field(default_factory=list)


def _slots_in(lo: int, hi: int) -> Callable[[Recommendation, CapacityCurve | None], bool]:
    return lambda r, _c: r.knob == "slots" and r.direction == "up" and lo <= (r.target or 0) <= hi


def _compute(
    max_slots: int, replicas: int
) -> Callable[[Recommendation, CapacityCurve | None], bool]:
    def ok(r: Recommendation, c: CapacityCurve | None) -> bool:
        never_up = not (r.knob == "slots" and r.direction == "up")
        return (
            r.verdict == "compute_bound"
            and never_up
            and (r.target or 0) <= max_slots
            and r.replicas == replicas
            and c is not None
            and c.plateau == "compute"
        )

    return ok


def scenarios() -> list[Scenario]:
    rng = random.Random(7)
    script = ["503" if rng.random() < 0.1 else "ok" for _ in range(80)]
    return [
        Scenario(
            "4 slots, open loop 33 req/s (vLLM metrics)",
            dict(slots=4, metrics_dialect="vllm"),
            dict(rate=[33.0], duration=4.0),
            "33 x 0.24 x 1.2 = 10 slots (8-12); the old fix said 170",
            _slots_in(8, 12),
        ),
        Scenario(
            "4 slots, closed loop c=1,4,16 (vLLM metrics)",
            dict(slots=4, metrics_dialect="vllm"),
            dict(concurrency=[1, 4, 16], duration=2.5),
            "admission limit 4: 16 clients need 16 slots",
            _slots_in(16, 16),
        ),
        Scenario(
            "16 slots, compute knee 4, c=1,4,16",
            dict(slots=16, compute_knee=4, metrics_dialect="vllm"),
            dict(concurrency=[1, 4, 16], duration=2.5, engine_slots=16),
            "compute-bound past 4: slots <= 8, 4 replicas for 16 clients",
            _compute(8, 4),
        ),
        Scenario(
            "8 slots, compute knee 2, c=1,2,8",
            dict(slots=8, compute_knee=2, metrics_dialect="vllm"),
            dict(concurrency=[1, 2, 8], duration=2.5, engine_slots=8),
            "compute-bound past 2: no slot raise, slots <= 4",
            _compute(4, 4),
        ),
        Scenario(
            "10% random 503s, flat latency, 10 req/s",
            dict(script=script),
            dict(rate=[10.0], duration=4.0),
            "error-driven, not overloaded",
            lambda r, _c: r.verdict == "error_driven",
            scrape=False,
        ),
    ]


def run_scenario(sc: Scenario) -> RunResult:
    from infersight.bench import BenchConfig
    from infersight.entrypoints.bench import bench_and_diagnose
    from infersight_testkit.fake.openai import FakeConfig, FakeOpenAI

    with FakeOpenAI.subprocess(FakeConfig(**SERVICE, **sc.server)) as srv:
        url = srv.base_url
        cfg = BenchConfig(
            url=url,
            scrape=[url + "/metrics"] if sc.scrape else [],
            no_scrape=not sc.scrape,
            sample_interval=0.25,
            max_tokens=5,
            input_tokens="fixed:16",
            progress=False,
            diagnose=True,
            **sc.bench,
        )
        return bench_and_diagnose(cfg)


def curve_says(c: CapacityCurve | None) -> str:
    if c is None:
        return "-"
    if c.knee_reached:
        return f"compute knee {c.knee:.3g} ({c.knee_level})"
    if c.plateau == "admission":
        return f"admission limit {c.plateau_at:.3g} ({c.plateau_level})"
    return f"knee not reached (above {c.above:.3g})" if c.above else "no knee"


def fix_number(r: Recommendation) -> str:
    if r.knob in ("slots", "replicas") and r.target is not None:
        step = f"{r.current} -> {r.target}" if r.current else f"{r.target}"
        reps = (
            f", {r.replicas} replicas"
            if r.replicas and r.replicas > 1 and r.knob == "slots"
            else ""
        )
        return f"{r.knob} {r.direction} {step}{reps}"
    return f"{r.knob or 'no knob'} ({r.direction})"


def agrees_with_table(r: Recommendation, c: CapacityCurve | None) -> list[str]:
    """What a fix must not claim against its own curve; empty when it agrees."""
    bad = []
    if c is None:
        return bad
    if c.plateau == "compute" and r.knob == "slots" and r.direction == "up":
        bad.append("raises slots past a measured compute knee")
    if c.knee_reached and c.knee and r.knob == "slots" and (r.target or 0) > 2 * round(c.knee):
        bad.append(f"asks for {r.target} slots, more than 2 x the knee ({c.knee:.3g})")
    if c.plateau == "admission" and r.knob == "slots" and r.direction == "down":
        bad.append("lowers the slots of an admission-limited server")
    return bad


def demo(path: Path, con: Console) -> bool:
    from infersight.report.capacity_curve import advice_lines, print_curve

    run = load_run_result(path)
    found = diagnose_run(run)
    con.print(f"[bold]demo run {path}[/]")
    if found.curve is not None:
        print_curve(found.curve, con)
    rec = found.recommendation
    if rec is None:
        con.print("no recommendation")
        return False
    for label, text in advice_lines(rec):
        con.print(f"[bold]{label}:[/] {text}", highlight=False)
    bad = agrees_with_table(rec, found.curve)
    con.print("[green]the fix agrees with the table[/]" if not bad else f"[red]{'; '.join(bad)}[/]")
    return not bad


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--demo", type=Path, help="also check this saved run (runs/demo/result.json)")
    ap.add_argument("--only", help="run the scenarios whose name contains this text")
    ap.add_argument(
        "--quick",
        action="store_true",
        help="two scenarios: the open-loop slot limit and the compute knee",
    )
    args = ap.parse_args()
    con = Console(width=200)
    table = Table(title="diagnose advice against the fake server's truth", title_justify="left")
    for col in ("scenario", "verdict", "fix", "the curve says", "truth", "agrees"):
        table.add_column(col)
    ok = True
    chosen = scenarios()
    if args.quick:
        chosen = [chosen[0], chosen[2]]
    for sc in chosen:
        if args.only and args.only not in sc.name:
            continue
        result = run_scenario(sc)
        rec, curve = result.recommendation, result.capacity_curve
        if rec is None:
            table.add_row(sc.name, "-", "-", curve_says(curve), sc.truth, "[red]no fix[/]")
            ok = False
            continue
        good = sc.check(rec, curve) and not agrees_with_table(rec, curve)
        ok &= good
        table.add_row(
            sc.name,
            rec.verdict,
            fix_number(rec),
            curve_says(curve),
            sc.truth,
            "[green]yes[/]" if good else "[red]no[/]",
        )
    con.print(table)
    if args.demo is not None:
        ok &= demo(args.demo, con)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
