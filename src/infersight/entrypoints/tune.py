"""``infersight tune`` as a function: targets, trials (bench, then diagnose), the search,
and the outputs (docs/design.md section 8).

Each trial opens the target at one setting (the embedded engine or a launched server
started for it, or a gateway limit set), runs bench with the one workload every trial
shares, diagnoses the run and saves its RunResult under ``OUT/trials/NN-.../``. The
search itself is :class:`infersight.tune.TuneSession`'s; this module only wires it.
"""

from __future__ import annotations

import time
from pathlib import Path

from rich.console import Console

from infersight.bench import BenchConfig
from infersight.client import resolve_api_key
from infersight.core.errors import ConfigError, InfersightError
from infersight.core.tune_result import TrialRecord, TuneResult, save_tune_result
from infersight.entrypoints.tune_ray import RayTrials
from infersight.entrypoints.tune_targets import make_target
from infersight.entrypoints.tune_trial import Trials
from infersight.report import table_console, write_text
from infersight.report.tune_html import render_tune_html
from infersight.tune import (
    ParallelTuneSession,
    TuneConfig,
    TuneOptions,
    TuneProgress,
    TuneSession,
    render_tune,
)

__all__ = ["run_tune"]


class _Watch(TuneProgress):
    """The progress bar, and the TuneResult saved after every trial (a crash or a
    second Ctrl-C still leaves what was done)."""

    result: TuneResult | None = None
    path: Path | None = None

    def trial_done(self, trial: TrialRecord, objective: str) -> None:
        super().trial_done(trial, objective)
        if self.result is not None and self.path is not None:
            running = self.result.model_copy(update={"partial": True, "stopped": "running"})
            save_tune_result(running, self.path)


def run_tune(
    cfg: TuneConfig,
    bench: BenchConfig,
    *,
    console: Console | None = None,
    llmd: str | None = None,
) -> TuneResult:
    """Tune the target the flags name; print and save the result (with ``llmd``, a
    version, each trial also gets llm-d-benchmark's reports in its folder's ``llm-d/``)."""
    con = console or table_console()
    api_key = resolve_api_key(env=bench.target.api_key_env, file=bench.target.api_key_file)
    target = make_target(cfg, api_key)
    if "slots" not in target.baseline and not bench.load.concurrency and not bench.load.rate:
        raise ConfigError(
            "the --launch template has no slot placeholder to size each "
            "trial's load by: give --concurrency or --rate"
        )
    out = Path(cfg.out or time.strftime("runs/tune-%Y%m%d-%H%M%S"))
    trials = Trials(target, bench, cfg.target_kind, out, llmd)
    pool = None
    if cfg.ray:
        pool = RayTrials(cfg, bench, trials, api_key)
    opts = TuneOptions(
        baseline=dict(target.baseline),
        knobs=dict(target.knobs),
        search=cfg.search,
        slo=dict(bench.load.slo),
        knob=cfg.knob,
        values=list(cfg.values) or None,
        budget_s=cfg.budget,
        target=target.describe(),
        per_slot=not bench.load.concurrency and not bench.load.rate,
    )
    watch = _Watch(con, enabled=cfg.progress, budget_s=cfg.budget)
    session: TuneSession
    if pool is not None:
        session = ParallelTuneSession(
            opts, pool.run_trials, pool.slots, nodes=pool.nodes, watcher=watch
        )
        session.result.notes.extend(pool.notes)
    else:
        session = TuneSession(opts, trials, watcher=watch)
    watch.result, watch.path = session.result, out / "tune.json"
    where = f" on {len(pool.slots)} Ray worker(s)" if pool is not None else ""
    con.print(
        f"[dim]tune: {cfg.target_kind} target{where}, baseline "
        f"{', '.join(f'{k} {v}' for k, v in sorted(target.baseline.items()))}; "
        f"trials in {out}[/]",
        highlight=False,
    )
    try:
        with watch:
            result = session.run()
    finally:
        if pool is not None:
            pool.close()
        try:
            session.result.notes.extend(target.close())
        except InfersightError as e:
            session.result.notes.append(f"could not restore the target: {e}")
    save_tune_result(result, out / "tune.json")
    html = write_text(out / "tune.html", render_tune_html(result, trials.runs))
    render_tune(result, con)
    con.print(f"wrote {out / 'tune.json'} and {html}")
    return result
