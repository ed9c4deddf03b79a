"""The Verdict document (docs/design.md section 5): what is wrong, the evidence, the fix.

``diagnose`` produces these models and ``RunResult.diagnosis`` stores them, so every
reader (the console, the report, a script) gets typed verdicts from the file alone.
Each piece of evidence has a stable ``key`` ("itl_floor", "slots") for programs and a
``name`` ("ITL floor", "slots (S)") for people; renaming a label never breaks a reader.

Files written before evidence had keys still load: a known old label is given its
key, any other label a key derived from its words.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, Field, model_validator

from infersight.core.server_model import Fix

__all__ = [
    "MARGINAL",
    "Q_SUSTAINED",
    "VERDICT_IDS",
    "Evidence",
    "Verdict",
    "VerdictWindow",
    "evidence_key",
    "is_marginal",
]

#: A flag that clears its threshold by less than this fraction is "marginal"
#: (docs/design.md section 5): shown as such, never the headline.
MARGINAL = 0.20
#: Fraction of a window's engine scrapes with requests waiting for its queue to count as
#: sustained (docs/design.md section 5: "Q>0 sustained"): the queue rules, and the model
#: judging whether a late client or the server set a level's pace.
Q_SUSTAINED = 0.5


def is_marginal(value: float, limit: float) -> bool:
    """Whether ``value`` is past ``limit`` by less than :data:`MARGINAL` of it."""
    if limit == 0:
        return False
    return 0.0 <= (value - limit) / abs(limit) < MARGINAL


#: Every verdict id, in the order outputs list them (most actionable first).
VERDICT_IDS: tuple[str, ...] = (
    "client_limited",
    "memory_pressure",
    "error_driven",
    "overloaded",
    "load_imbalance",
    "kv_bound",
    "slot_bound",
    "capacity",
    "compute_bound",
    "prefix_cache_miss",
    "host_starved",
    "busy_illusion",
    "under_loaded",
    "compute_bound_prefill",
    "bandwidth_bound_decode",
    "healthy",
)

#: Keys of the labels older files used for evidence that readers look up (the floors).
_LEGACY_KEYS = {
    "ITL p50": "itl_p50",
    "ITL floor": "itl_floor",
    "ITL / floor": "itl_ratio",
    "TTFT p50 (from actual send)": "ttft_sent_p50",
    "TTFT p50 (from sent)": "ttft_sent_p50",
    "TTFT floor (prefill)": "ttft_floor",
    "TTFT / floor": "ttft_ratio",
}


def evidence_key(name: str) -> str:
    """The key of an evidence that was stored without one (files from older versions)."""
    known = _LEGACY_KEYS.get(name)
    if known is not None:
        return known
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_") or "evidence"


class VerdictWindow(BaseModel):
    """The time span a verdict covers (monotonic seconds, as in the RunResult)."""

    start: float
    end: float

    @model_validator(mode="before")
    @classmethod
    def _from_pair(cls, data: Any) -> Any:
        # Some older files store the window as a [start, end] pair.
        if isinstance(data, list | tuple) and len(data) == 2:
            return {"start": data[0], "end": data[1]}
        return data

    @property
    def seconds(self) -> float:
        return max(0.0, self.end - self.start)


class Evidence(BaseModel):
    """One measured value behind a verdict, and where it came from."""

    #: Stable identifier for programs (``itl_floor``); ``name`` is the label people read.
    key: str = ""
    name: str
    value: float | int | str | None
    unit: str = ""
    source: str = ""

    @model_validator(mode="after")
    def _default_key(self) -> Evidence:
        if not self.key:
            self.key = evidence_key(self.name)
        return self

    def value_text(self) -> str:
        """The value as console text: 3 significant digits, thousands separated."""
        v = self.value
        if isinstance(v, float):
            return f"{v:.3g}" if abs(v) < 1000 else f"{v:,.0f}"
        return "n/a" if v is None else str(v)

    def text(self) -> str:
        return f"{self.name} = {self.value_text()}{(' ' + self.unit) if self.unit else ''}"


class Verdict(BaseModel):
    """A diagnosis for one time window, as stored in ``RunResult.diagnosis``."""

    id: str
    title: str
    summary: str
    window: VerdictWindow
    evidence: list[Evidence] = Field(default_factory=list)
    confidence: float = Field(ge=0.0, le=1.0)
    fixes: list[str] = Field(default_factory=list)
    #: Per fix line, what it does as a typed action (the knob and which way, or None
    #: for advice without one): programs read these, never the prose of ``fixes``.
    actions: list[Fix | None] = Field(default_factory=list)
    #: The load level (bench sweep) the window belongs to, if any.
    level: str | None = None
    #: The engine the fixes are named for ("vllm", "llamacpp", "embedded", ...).
    engine: str = "unknown"
    #: The flag clears its threshold by less than 20%: shown, never the headline.
    marginal: bool = False

    def action_of(self, line: int) -> Fix | None:
        """The typed action of fix line ``line`` (None: advice without a knob)."""
        return self.actions[line] if line < len(self.actions) else None

    def turns(self, knob: str, direction: str) -> bool:
        """Whether any of its fixes turns ``knob`` ``direction`` ("up", "down")."""
        return any(
            a is not None and a.knob == knob and a.turns() == direction for a in self.actions
        )

    def find(self, key: str) -> Evidence | None:
        """The first evidence with this key (or, failing that, this label)."""
        for e in self.evidence:
            if e.key == key:
                return e
        return next((e for e in self.evidence if e.name == key), None)

    def evidence_value(self, key: str) -> Any:
        """The value of the evidence with this key or label (None if absent)."""
        e = self.find(key)
        return None if e is None else e.value
