"""One level of a trace replay or of conversations: plan, survey, run, fidelity."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from infersight.bench.level_plan import LevelOutcome, LevelPlan
from infersight.bench.progress import LiveDisplay, LiveStats
from infersight.bench.replay_plan import ReplayPrep, level_plan, survey
from infersight.bench.workload import Tokenize
from infersight.core.records import RequestRecord
from infersight.stats.replay_stats import by_turn, replay_fidelity, session_sharing

if TYPE_CHECKING:
    from infersight.bench.config import BenchConfig
    from infersight.bench.level_spec import LevelSpec
    from infersight.bench.target import Target

__all__ = ["LEAD_S", "replay_aggregate", "run_replay_level", "shared_prefix_sharing"]

#: A single process starts a replay this long after it is planned, so the requests due
#: first are built before they are due.
LEAD_S = 0.25

Execute = Callable[[LevelPlan, LiveStats, float], Awaitable[LevelOutcome]]


async def run_replay_level(
    cfg: BenchConfig,
    level: LevelSpec,
    prep: ReplayPrep,
    target: Target,
    tokenize: Tokenize | None,
    execute: Execute,
    display: LiveDisplay,
) -> tuple[LevelOutcome, dict[str, Any]]:
    """Run the level; return its outcome and what its aggregate needs besides the
    records: the rate its schedule offered and the survey of what it sent."""
    plan, total, rate = level_plan(cfg, level, prep, model=target.model, path=target.path)
    info = await survey(plan, tokenize)
    live = LiveStats(total=total, duration=cfg.duration)
    display.show(level.name, live)
    outcome = await execute(plan, live, LEAD_S)
    return outcome, {"rate": rate, "survey": info}


def replay_aggregate(records: list[RequestRecord], info: dict[str, Any]) -> dict[str, Any]:
    """The level's ``replay`` aggregate: fidelity, prefix sharing intended against sent,
    and TTFT per conversation turn."""
    sharing = dict(info)
    conv = session_sharing(records)
    if conv is not None:  # a conversation's history, as the server counted it
        sharing["sent"] = conv
        sharing["sent_basis"] = "server prompt tokens repeating the previous turn"
    elif sharing.get("sent") is not None:
        sharing["sent_basis"] = (
            "characters of the texts sent, compared in 32-character pieces from their start"
        )
    return {
        **(replay_fidelity(records) or {}),
        "prefix_sharing": sharing,
        "turns": by_turn(records),
    }


def shared_prefix_sharing(records: list[RequestRecord], prefix: int) -> dict[str, Any]:
    """``--shared-prefix N``: every request after the first repeats N tokens."""
    ok = [r for r in records if r.prompt_tokens]
    total = sum(r.prompt_tokens or 0 for r in ok)
    return {
        "intended": prefix * max(0, len(ok) - 1) / total if total else None,
        "sent": None,
        "basis": "--shared-prefix tokens over the prompt tokens the server counted",
    }
