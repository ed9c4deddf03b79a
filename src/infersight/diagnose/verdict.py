"""The Verdict document (design.md section 5): what is wrong, the evidence, the fix."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

__all__ = ["VERDICT_IDS", "Evidence", "Verdict", "Window"]

#: Every verdict id, in the order outputs list them (most actionable first).
VERDICT_IDS: tuple[str, ...] = (
    "client_limited",
    "error_driven",
    "overloaded",
    "kv_bound",
    "slot_bound",
    "capacity",
    "host_starved",
    "busy_illusion",
    "under_loaded",
    "compute_bound_prefill",
    "bandwidth_bound_decode",
    "healthy",
)


class Window(BaseModel):
    """The time span a verdict covers (monotonic seconds, as in the RunResult)."""

    start: float
    end: float

    @property
    def seconds(self) -> float:
        return max(0.0, self.end - self.start)


class Evidence(BaseModel):
    """One measured value behind a verdict, and where it came from."""

    name: str
    value: float | int | str | None
    unit: str = ""
    source: str = ""

    def text(self) -> str:
        v = self.value
        if isinstance(v, float):
            s = f"{v:.3g}" if abs(v) < 1000 else f"{v:,.0f}"
        else:
            s = "n/a" if v is None else str(v)
        return f"{self.name} = {s}{(' ' + self.unit) if self.unit else ''}"


class Verdict(BaseModel):
    """A diagnosis for one time window; ``model_dump()`` goes into RunResult.diagnosis."""

    id: str
    title: str
    summary: str
    window: Window
    evidence: list[Evidence] = Field(default_factory=list)
    confidence: float = Field(ge=0.0, le=1.0)
    fixes: list[str] = Field(default_factory=list)
    #: The load level (bench sweep) the window belongs to, if any.
    level: str | None = None
    #: The engine the fixes are named for ("vllm", "llamacpp", "embedded", ...).
    engine: str = "unknown"

    def evidence_value(self, name: str) -> Any:
        """The value of the evidence called ``name`` (None if absent)."""
        for e in self.evidence:
            if e.name == name:
                return e.value
        return None
