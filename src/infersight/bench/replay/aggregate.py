"""The aggregate of one level of a trace replay or of conversations (planned and run
by :mod:`infersight.bench.replay.prepare`): fidelity, prefix sharing intended against
sent, and TTFT per conversation turn; and the prefix sharing of ``--shared-prefix``.
"""

from __future__ import annotations

from typing import Any

from infersight.core.records import RequestRecord
from infersight.stats.replay_stats import by_turn, replay_fidelity, session_sharing

__all__ = ["replay_aggregate", "shared_prefix_sharing"]


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
