"""One tune trial's bench configuration and diagnosis, shared by serial tune
(``entrypoints.tune``) and ``tune --ray`` (``entrypoints.tune_ray``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from infersight.bench import BenchConfig
from infersight.core.records import RunResult
from infersight.diagnose import embed_diagnosis

__all__ = ["DIAGNOSIS_LOAD", "diagnose", "trial_bench"]

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
