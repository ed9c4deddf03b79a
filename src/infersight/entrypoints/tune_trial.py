"""One tune trial: its bench configuration, diagnosis and saved files, shared by serial
tune (``entrypoints.tune``) and ``tune --ray`` (``entrypoints.tune_ray``)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from infersight.bench import BenchConfig
from infersight.core.errors import InfersightError
from infersight.core.records import RunResult
from infersight.diagnose import embed_diagnosis
from infersight.entrypoints.bench import bench_on
from infersight.entrypoints.tune_targets import Target
from infersight.report import write_outputs
from infersight.report.llmd.writer import write_llmd
from infersight.tune import TrialRun

__all__ = ["Trials", "diagnose", "trial_bench"]

#: The baseline's extra level for its diagnosis: this many times its slots in flight.
DIAGNOSIS_LOAD = 4


def trial_bench(
    bench: BenchConfig, setting: Mapping[str, int], kind: str, role: str
) -> tuple[BenchConfig, list[str] | None]:
    """One trial's bench run, and the levels its objective comes from.

    Without --concurrency or --rate, a trial keeps as many requests in flight as its
    setting has slots (all busy, none queued), and its objective comes from that level.
    The baseline runs a second level with 4 times as many, so its diagnosis sees what
    binds past the current setting (a queue, a knee) and how far to go.
    """
    update: dict[str, Any] = {"progress": False, "out": None}
    levels = None
    if kind == "launch" and "slots" in setting:
        update["engine_slots"] = setting["slots"]  # vLLM exports no slot limit
    if not bench.load.concurrency and not bench.load.rate:
        s = setting.get("slots", 0)
        update["concurrency"] = [s, DIAGNOSIS_LOAD * s] if role in ("baseline", "a/a") else [s]
        levels = [f"c={s}"]
    return bench.replace(**update), levels


def diagnose(result: RunResult, bench: BenchConfig) -> None:
    """Embed the run's diagnosis (unless --no-diagnose, or nothing was recorded)."""
    if bench.output.diagnose and result.records:
        embed_diagnosis(result, store_physics=True)


class Trials:
    """Runs one trial: the target at a setting, bench, diagnose, save."""

    def __init__(
        self, target: Target, bench: BenchConfig, kind: str, out: Path, llmd: str | None = None
    ) -> None:
        self.target, self.bench, self.kind, self.out = target, bench, kind, out
        self.llmd = llmd
        self.runs: dict[str, RunResult] = {}

    def __call__(self, setting: Mapping[str, int], name: str, role: str) -> TrialRun:
        trial_dir = self.out / "trials" / name
        t0 = time.monotonic()
        bench, levels = trial_bench(self.bench, setting, self.kind, role)
        try:
            with self.target.open(setting, trial_dir) as ep:
                result = bench_on(bench, ep)
        except InfersightError as e:
            return TrialRun(error=e, wall=time.monotonic() - t0)
        diagnose(result, self.bench)
        return self.save(result, setting, trial_dir, time.monotonic() - t0, levels)

    def save(
        self,
        result: RunResult,
        setting: Mapping[str, int],
        trial_dir: Path,
        wall: float,
        levels: list[str] | None,
        node: str | None = None,
    ) -> TrialRun:
        """Write a trial's RunResult (and llm-d reports) under ``trial_dir``."""
        result.config["tune_setting"] = dict(setting)
        path = write_outputs(result, trial_dir)["json"].relative_to(self.out).as_posix()
        if self.llmd:
            write_llmd(result, trial_dir / "llm-d", version=self.llmd)
        self.runs[path] = result
        return TrialRun(result=result, path=path, wall=wall, levels=levels, node=node)
