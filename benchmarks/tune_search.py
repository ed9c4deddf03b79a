"""tune's guided search (the model's proposals) against the exhaustive grid (issues 22
and 30, docs/design.md section 8).

1. A fake engine whose best setting is known, launched per trial through ``--launch``:
   a slot limit (the knob) and a compute knee K (past K generations at once every step
   slows by running/K), with the SLO ``tpot_p99 < 2.5 x ITL``: goodput grows with slots up
   to K, stays flat until TPOT breaks the SLO at 2.5 K, and falls after. The cheapest
   best setting is K. Both searches start from 2 slots over the values 1..N.
2. The embedded engine over ``--parallel`` in {1, 2, 4, 8, 16}, both searches.

For each: the setting chosen, its goodput as the grid measured it against the grid's
best (goal >= 0.95), the settings and trials used against the grid's (goal <= 1/3), the
model's error on the trials it predicted (its prediction before each ran), the choices
their confirmation run refuted, and those reported all the same (must be 0).

    .venv/bin/python benchmarks/tune_search.py [--quick] [--no-engine]

Default: K = 6, values 1..32, 4 s per trial. ``--quick``: values 1..16, 3 s per trial.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from infersight.bench import BenchConfig
from infersight.core.tune_result import TuneResult
from infersight.entrypoints.tune import run_tune
from infersight.tune import TuneConfig

KNEE, ITL, TTFT, TOKENS = 6, 0.01, 0.02, 16


def _tune(out: Path, bench: BenchConfig, **kw: Any) -> TuneResult:
    cfg = TuneConfig.build(out=str(out), progress=False, **kw)
    return run_tune(cfg, bench, console=Console(file=io.StringIO(), width=160))


def _by_setting(result: TuneResult, knob: str) -> dict[int, float]:
    """Each setting's objective as measured in this run (the first trial of it)."""
    out: dict[int, float] = {}
    for t in result.trials:
        if t.status == "ok" and t.objective is not None and t.role != "rerun":
            out.setdefault(t.setting[knob], t.objective)
    return out


def _model_error(result: TuneResult) -> str:
    """Mean |predicted / measured - 1| over the trials the model predicted."""
    errs = [
        abs(t.predicted / t.objective - 1)
        for t in result.trials
        if t.predicted is not None and t.objective and t.status == "ok"
    ]
    return f"{sum(errs) / len(errs):.1%} ({len(errs)})" if errs else "-"


def refuted_reported(result: TuneResult) -> int:
    """Choices reported although their confirmation run refuted them (must be 0)."""
    if result.chosen is None:
        return 0
    conf = result.trial(result.confirmed_by)
    held = conf is not None and conf.confirmed is not False and conf.setting == result.chosen
    refuted = {tuple(sorted(t.setting.items())) for t in result.trials if t.confirmed is False}
    return int(
        (not held and result.stopped == "done") or tuple(sorted(result.chosen.items())) in refuted
    )


def _rows(table: Table, name: str, grid: TuneResult, guided: TuneResult, knob: str) -> None:
    g = _by_setting(grid, knob)
    best = max(g.values())
    n_grid = len(g)
    for label, r in (("grid", grid), ("guided", guided)):
        chosen = (r.chosen or {}).get(knob)
        settings = len({t.setting[knob] for t in r.trials})
        reached = g.get(chosen) if chosen is not None else None
        refuted = sum(1 for t in r.trials if t.confirmed is False)
        table.add_row(
            name,
            label,
            str(chosen),
            "-" if reached is None else f"{reached:.3g}",
            f"{best:.3g}",
            "-" if reached is None else f"{reached / best:.3f}",
            f"{settings} / {n_grid}",
            f"{settings / n_grid:.2f}",
            f"{len(r.trials)} / {len(grid.trials)}",
            f"{len(r.trials) / len(grid.trials):.2f}",
            _model_error(r),
            f"{refuted} / {refuted_reported(r)}",
            "yes" if r.slo_met else "no" if r.slo_met is False else "-",
            f"{r.wall_s:.0f}",
            r.verdict or r.stopped,
        )


def fake_server(table: Table, con: Console, tmp: Path, quick: bool) -> None:
    top, seconds = (16, 3.0) if quick else (32, 4.0)
    values = list(range(1, top + 1))
    template = (
        f"{sys.executable} -m infersight_testkit.fake.openai --port {{port}} "
        f"--slots {{slots}} --compute-knee {KNEE} --ttft {TTFT} --itl {ITL} "
        f"--tokens {TOKENS} --metrics-dialect vllm"
    )
    bench = BenchConfig.build(
        max_tokens=TOKENS,
        input_tokens="fixed:16",
        duration=seconds,
        slo=f"tpot_p99<{2.5 * ITL * 1000:g}ms",
        progress=False,
    )
    con.print(
        f"fake engine: compute knee {KNEE}, SLO tpot_p99 < {2.5 * ITL * 1000:g} ms "
        f"(met up to {int(2.5 * KNEE)} slots); values 1..{top}, baseline 2, "
        f"{seconds:g} s per trial"
    )
    common = {"launch": template, "slots": 2, "values": values, "start_timeout": 30.0}
    grid = _tune(tmp / "fake-grid", bench, search="grid", **common)
    guided = _tune(tmp / "fake-guided", bench, search="guided", **common)
    con.print(f"  guided: {guided.summary}", highlight=False)
    con.print(
        "  guided trials (slots: measured / the model's prediction before it ran): "
        + ", ".join(
            f"{t.setting['slots']}: {t.objective or 0:.3g}/{t.predicted_text()}"
            for t in guided.trials
        ),
        highlight=False,
    )
    _rows(table, f"fake, knee {KNEE}", grid, guided, "slots")


def embedded(table: Table, con: Console, tmp: Path, quick: bool, seconds: float | None) -> None:
    seconds = seconds or (4.0 if quick else 6.0)
    bench = BenchConfig.build(
        max_tokens=32, input_tokens="fixed:32", duration=seconds, progress=False
    )
    con.print(
        "embedded engine: --parallel in {1, 2, 4, 8, 16}, baseline 8, "
        f"best sustainable throughput, {seconds:g} s per trial"
    )
    common = {"slots": 8, "ctx": 512, "knob": "slots", "values": [1, 2, 4, 8, 16]}
    grid = _tune(tmp / "engine-grid", bench, search="grid", **common)
    guided = _tune(tmp / "engine-guided", bench, search="guided", **common)
    con.print(f"  guided: {guided.summary}", highlight=False)
    _rows(table, "embedded engine", grid, guided, "slots")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer values, shorter trials")
    ap.add_argument("--no-engine", action="store_true", help="skip the embedded engine")
    ap.add_argument("--no-fake", action="store_true", help="skip the fake engine")
    ap.add_argument(
        "--engine-seconds",
        type=float,
        default=None,
        help="seconds per trial on the embedded engine (default 6; 4 with --quick)",
    )
    ap.add_argument("--keep", type=Path, default=None, help="keep the trials in this folder")
    args = ap.parse_args()
    print(
        "load average (1, 5, 15 min) at the start: "
        f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    con = Console()
    if not con.is_terminal:
        con = Console(width=200)
    table = Table(
        "target",
        "search",
        "chosen",
        "its goodput (grid's run)",
        "grid best",
        "reached",
        "settings",
        "of grid",
        "trials",
        "of grid",
        "model error",
        "refuted / reported",
        "SLO met (confirmation)",
        "wall s",
        "before/after",
    )
    with tempfile.TemporaryDirectory() as td:
        tmp = args.keep or Path(td)
        if not args.no_fake:
            fake_server(table, con, tmp, args.quick)
        if not args.no_engine:
            embedded(table, con, tmp, args.quick, args.engine_seconds)
    con.print(table)
    con.print(
        "goal: reached >= 0.95 of the grid's best goodput with settings and trials <= "
        "1/3 of the grid's; trials count the A/A run and the confirmation runs too; "
        "refuted choices reported: 0"
    )
    con.print(
        f"load average (1, 5, 15 min) at the end: {', '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )


if __name__ == "__main__":
    main()
