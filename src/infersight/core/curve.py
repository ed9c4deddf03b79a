"""The run's capacity curve (docs/design.md section 2, "The capacity curve").

One point per load level: how much work was in flight, what throughput it gave, and
what it cost in latency. From the points come the *measured knee* (the in-flight count
past which throughput grows less than 10% per doubling while TPOT grows) and the shape
of the plateau: an admission limit (throughput and TPOT flat, TTFT growing) or compute
(throughput flat, TPOT growing with the work in flight).

This module holds the stored form only; ``infersight.diagnose`` builds it from the
records and samples, stores it in ``RunResult.capacity_curve``, and every fix and
``tune`` read it from there.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from infersight.core.server_model import Fix

__all__ = ["CapacityCurve", "CurvePoint", "Recommendation"]


class CurvePoint(BaseModel):
    """One level of the run on the curve."""

    level: str
    #: Mean requests in flight: the engine's running count R, else the client's.
    inflight: float | None = None
    #: "engine" (R from /metrics) or "client" (time-weighted requests in flight).
    inflight_source: str = "client"
    #: The client's time-weighted requests in flight (the work offered; the knee's
    #: doublings are counted on it, since an admission limit caps R).
    client_inflight: float | None = None
    #: The level's load: closed-loop clients, or the open-loop rate offered (req/s).
    concurrency: int | None = None
    offered_rate: float | None = None
    #: Completions per second over the level's throughput span.
    throughput: float | None = None
    #: Output tokens per second over the same span.
    token_throughput: float | None = None
    tpot_p50: float | None = None
    itl_p50: float | None = None
    ttft_p50: float | None = None
    ttft_p99: float | None = None
    #: Mean requests waiting (the engine's Q, with those queued before it).
    queue: float | None = None
    #: Seconds a request spends in the engine at this level (Little's law: R / X).
    time_in_engine: float | None = None
    #: The level had a steady-state window.
    steady: bool = False
    #: Open-loop levels: whether the rate was sustainable (None: not judged).
    sustainable: bool | None = None
    #: The level's client-limited flag is set (and more than marginal).
    client_limited: bool = False


class CapacityCurve(BaseModel):
    """The run's levels ordered by work in flight, with the knee and the plateau."""

    points: list[CurvePoint] = Field(default_factory=list)
    #: In-flight count at the measured knee (None when not reached).
    knee: float | None = None
    #: The level at the knee.
    knee_level: str | None = None
    #: False: no level reached the knee; ``above`` says how far the run went.
    knee_reached: bool = False
    above: float | None = None
    #: What binds at the plateau: "admission" (slots, a scheduler budget) or "compute".
    plateau: Literal["admission", "compute"] | None = None
    #: Requests running where throughput stops growing, whatever binds (for an
    #: admission limit: the limit, as throughput x time in the engine shows it).
    plateau_at: float | None = None
    #: The first level of the plateau.
    plateau_level: str | None = None
    #: The best operating point (docs/design.md section 5): the knee, or the
    #: lowest-latency steady level within 5% of the best sustainable throughput.
    best_level: str | None = None
    #: Best sustainable throughput (req/s), the capacity of one replica.
    capacity: float | None = None
    #: How each figure was obtained, for the evidence tables.
    notes: list[str] = Field(default_factory=list)


class Recommendation(BaseModel):
    """The run's one recommendation (docs/design.md section 5): what to change, to
    what, and what the run predicts it will do. ``tune`` takes its knob and direction."""

    #: The verdict it comes from ("slot_bound", "compute_bound", ...).
    verdict: str
    #: "slots", "replicas", "threads", "context", "load" or None (nothing to change).
    knob: str | None = None
    #: "up", "down" or "hold".
    direction: str | None = None
    current: int | None = None
    target: int | None = None
    replicas: int | None = None
    #: The fix as a user reads it, with the engine's own setting names.
    text: str
    #: Expected after the change: "throughput" (req/s), "ttft_p99" (s).
    predicted: dict[str, float | None] = Field(default_factory=dict)
    #: What the prediction rests on ("the fitted model (leave-one-level-out, held-out error 4%)").
    rests_on: str = ""
    #: "model" (the fitted model, within its checked error), "measured" (a level of the
    #: run), or "estimate" (beyond what the model's self-check supports, or physics).
    basis: str = "measured"
    #: The model's binding constraint: "slots", "kv", "compute", "client", "upstream",
    #: "none" (docs/design.md section 9); None when no model was fitted.
    limiter: str | None = None
    #: The typed fix the text was rendered from (None: the rules' advice, no model).
    fix: Fix | None = None
    #: Where the rules' reading named another limiter than the model's: one line that
    #: names both (docs/design.md section 9, "One voice"); empty when they agree.
    disagrees: str = ""
