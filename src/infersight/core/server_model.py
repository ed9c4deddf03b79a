"""The fitted model of the server, as stored in a RunResult (docs/design.md section 9).

``infersight.servermodel`` fits it from a run's records; this module holds only the
stored form, so ``report``, ``tune`` and ``predict`` read it from the file alone:

- :class:`Param`: one fitted parameter with its 95% interval and how it was found;
- :class:`ServerModel`: admission (slots, KV), the engine's step time, the first
  token's time, errors, the closed loop's think time and the load generator's ceiling;
- :class:`SelfCheck`: the model's error on levels it was not fitted on;
- :class:`Fix`: a typed fix with its predicted effect, its basis and the model's error.

Prose is rendered from these fields and is never parsed back.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

__all__ = [
    "CHECKED_METRICS",
    "MAPE_LIMIT",
    "UNCOUNTED",
    "Basis",
    "Fix",
    "LevelCheck",
    "Limiter",
    "Param",
    "Prediction",
    "SelfCheck",
    "ServerModel",
    "action",
]

#: The metrics the self-check predicts for each held-out level.
CHECKED_METRICS = ("throughput", "ttft_p50", "tpot_p50")
#: Held-out error (MAPE, each checked metric) at or under which a fix's number is "model".
MAPE_LIMIT = 0.15

Limiter = Literal["slots", "kv", "compute", "client", "upstream", "none", "unknown"]
Basis = Literal["model", "measured", "estimate"]


class Param(BaseModel):
    """A fitted parameter: its value, a 95% interval and where it came from."""

    value: float | None = None
    low: float | None = None
    high: float | None = None
    unit: str = ""
    #: "fitted", "stated" (a flag the user gave), "engine" (its /metrics or info
    #: endpoint), "not reached" (only a lower bound: ``low``) or "unknown".
    source: str = "fitted"

    def text(self) -> str:
        """ "4 (3-5) slots", "≥ 16", "unknown"."""
        if self.value is None:
            return f"≥ {self.low:.3g}" if self.low is not None else "unknown"
        iv = (
            f" ({self.low:.3g}–{self.high:.3g})"
            if self.low is not None and self.high is not None and self.high > self.low
            else ""
        )
        return f"{self.value:.3g}{iv}{(' ' + self.unit) if self.unit else ''}"


class ServerModel(BaseModel):
    """Admission, a FIFO queue and the engine's step time, fitted to one run.

    The step time while ``n`` sequences run is ``a + b·max(0, n - k)`` seconds (``k``
    0: the linear ``a + b·n``); each prompt token prefilled in a step adds ``c``
    seconds to it. A request's first token comes ``e + κ·step(n) + c_first·p`` after it
    is admitted, with ``p`` its prompt tokens; then one token per step. An engine that
    prefills in batches (``prefill_mode`` "batched": vLLM's scheduler, llama.cpp's
    server) computes the prompts admitted together in one step, so ``p`` is then their
    sum, and each of them gets its first token when that step ends.
    """

    slots: Param = Field(default_factory=Param)
    #: KV capacity in tokens (None: the engine does not export KV usage).
    kv_tokens: Param | None = None
    #: "reserve" (prompt + output held from admission) or "grow" (what is computed).
    kv_mode: str = "reserve"
    #: Tokens per KV block, the unit the engine allocates (vLLM's ``block_size``; 1: not
    #: exported): each request holds whole blocks.
    kv_block: float = 1.0
    a: Param = Field(default_factory=Param)
    b: Param = Field(default_factory=Param)
    k: Param = Field(default_factory=Param)
    c: Param = Field(default_factory=Param)
    e: Param = Field(default_factory=Param)
    kappa: Param = Field(default_factory=Param)
    c_first: Param = Field(default_factory=Param)
    #: "each" (a prompt's first token takes its own prefill) or "batched" (the prompts
    #: admitted together share one prefill step and its first-token time).
    prefill_mode: str = "each"
    #: Share of requests answered with an error, over the fitted levels.
    error_share: float = 0.0
    #: Closed-loop think time per level name (seconds between an answer and the
    #: client's next send).
    think: dict[str, float] = Field(default_factory=dict)
    #: The highest send rate the load generator kept up with, where a level was
    #: client-limited (req/s); None when no level reached it.
    client_ceiling: float | None = None
    #: The measured range of each fitted variable: running ``n``, prompt tokens per
    #: request ``p``, send ``rate`` (req/s) and ``clients``.
    measured: dict[str, float] = Field(default_factory=dict)
    #: The levels it was fitted on, and those left out with why.
    levels: list[str] = Field(default_factory=list)
    left_out: dict[str, str] = Field(default_factory=dict)
    requests: int = 0
    notes: list[str] = Field(default_factory=list)


#: Why a level's held-out error is not counted in the self-check's mean.
UNCOUNTED = "not counted: the only level with one sequence at a time"


class LevelCheck(BaseModel):
    """One level predicted by the model fitted without it (or with it: in-sample)."""

    level: str
    measured: dict[str, float | None] = Field(default_factory=dict)
    predicted: dict[str, float | None] = Field(default_factory=dict)
    #: Absolute percentage error per metric (0.1 = 10%).
    error: dict[str, float | None] = Field(default_factory=dict)
    #: Whether the level's error counts in the MAPE: the single-client level held out is
    #: shown but not counted (``UNCOUNTED``).
    counted: bool = True


class SelfCheck(BaseModel):
    """The model checked on the run itself (docs/design.md section 9)."""

    #: "leave-one-level-out" (3 levels or more), "in-sample" (2), "none" (fewer).
    method: str = "none"
    levels: list[LevelCheck] = Field(default_factory=list)
    #: Mean absolute percentage error per metric, over the counted levels.
    mape: dict[str, float | None] = Field(default_factory=dict)
    #: Whether the model may give numbers beyond what was measured.
    trusted: bool = False
    #: Why not, in one line (empty when trusted).
    why_not: str = ""

    def worst(self) -> float | None:
        vals = [v for v in self.mape.values() if v is not None]
        return max(vals) if vals else None


class Prediction(BaseModel):
    """What the model predicts at one setting: bench's own figures for that load."""

    throughput: float | None = None
    goodput: float | None = None
    ttft_p50: float | None = None
    #: Where the median of a measured level of ``band_n`` requests falls 95% of the
    #: time (order statistics of the predicted first tokens): a level whose share of
    #: waiting requests is near half has its median on a cliff, anywhere in between.
    ttft_p50_band: tuple[float, float] | None = None
    ttft_p99: float | None = None
    tpot_p50: float | None = None
    e2e_p50: float | None = None
    e2e_p99: float | None = None
    #: Mean requests running and waiting in one replica while the load was applied
    #: (up to the last send, not through the drain after it), and the share of requests
    #: that waited for admission at all (bursts queue even when the mean is low).
    running: float | None = None
    waiting: float | None = None
    queued: float | None = None
    sustainable: bool | None = None
    #: Whether the simulated level met every SLO check, as bench judges a measured
    #: level (the percentiles of each SLO key); None without an SLO.
    slo_met: bool | None = None


class Fix(BaseModel):
    """One change of one knob, with what the model predicts it does."""

    #: "slots", "replicas", "kv", "load", "threads", "context" or None (hold).
    knob: str | None = None
    #: Which way the knob turns ("up", "down", "hold"); set where ``to_value`` is not
    #: given (a fix that names the knob but gives no number).
    direction: Literal["up", "down", "hold"] | None = None
    from_value: float | None = None
    to_value: float | None = None
    predicted: Prediction = Field(default_factory=Prediction)
    #: "model" (held-out error within MAPE_LIMIT), "measured" (a level of the run),
    #: "estimate" (the model beyond its checked error).
    basis: Basis = "model"
    #: The self-check's worst MAPE, beside every number the fix gives.
    error: float | None = None
    #: The goal the fix meets: "slo", "throughput" (the load served), or "best goodput".
    goal: str = ""
    #: What the prediction rests on, for people.
    rests_on: str = ""
    #: Where the fix runs more sequences than the run had: its predicted effect if the
    #: step time grew in proportion to the running count past the measured top (the
    #: low end of what the run supports); None within the measured range.
    if_saturated: Prediction | None = None

    def turns(self) -> str | None:
        """Which way it turns the knob: the stated direction, else from the numbers."""
        if self.direction is not None or self.knob is None:
            return self.direction
        if self.to_value is None or self.from_value is None:
            return None
        return (
            "up"
            if self.to_value > self.from_value
            else "down"
            if self.to_value < self.from_value
            else "hold"
        )


def action(
    knob: str | None,
    direction: Literal["up", "down", "hold"] | None = None,
    from_value: float | None = None,
    to_value: float | None = None,
) -> Fix:
    """A verdict's typed action: the knob and which way, without a model's prediction."""
    return Fix(
        knob=knob, direction=direction, from_value=from_value, to_value=to_value, basis="measured"
    )
