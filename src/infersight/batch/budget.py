"""Tokens, dollars and the ``--max-cost`` guard.

Spent cost comes from each response's ``usage`` priced with the
:class:`~infersight.core.pricing.PriceTable`. Before a row is sent its cost is
*estimated*: prompt tokens from its size (characters per token calibrated on the rows
already answered, 4 until then) and output tokens from the mean observed so far
(x1.1, capped by the row's ``max_tokens``), or ``max_tokens`` (else 512) before five
rows have answered. A row is scheduled only if ``spent + in-flight estimates + its
estimate`` stays within ``--max-cost``; the first row that does not fit stops the
scheduling of new rows (rows in flight still finish).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from infersight.batch.input import BatchRow
from infersight.core.pricing import PriceTable

__all__ = ["CostMeter"]

_DEFAULT_OUT = 512


@dataclass
class CostMeter:
    prices: PriceTable | None
    default_model: str | None = None
    max_cost: float | None = None
    #: Cost already in the output file from earlier runs (counted in the budget).
    prior_cost: float = 0.0
    spent: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    unpriced: set[str] = field(default_factory=set)
    _inflight: dict[str, float] = field(default_factory=dict)
    _chars: int = 0
    _ptok: int = 0
    _ctok: int = 0
    _rows: int = 0

    @property
    def total(self) -> float:
        return self.prior_cost + self.spent

    @property
    def inflight_estimate(self) -> float:
        return sum(self._inflight.values())

    def _model(self, row: BatchRow) -> str | None:
        m = row.body.get("model")
        return str(m) if m else self.default_model

    def _price_cost(self, model: str | None, p: int, c: int) -> float | None:
        if self.prices is None:
            return None
        cost = self.prices.cost(model, p, c)
        if cost is None and model is not None:
            cost = self.prices.cost(None, p, c)  # a flat "*" price
        return cost

    def estimate(self, row: BatchRow) -> float:
        """Projected $ for one row before it is sent."""
        cpt = self._chars / self._ptok if self._ptok > 0 else 4.0
        prompt = int(row.prompt_chars / max(cpt, 0.5)) + 1
        cap = row.body.get("max_tokens") or row.body.get("max_completion_tokens")
        if row.url == "/v1/embeddings":
            out = 0
        elif self._rows >= 5:
            out = int(self._ctok / self._rows * 1.1) + 1
            if isinstance(cap, int):
                out = min(out, cap)
        else:
            out = cap if isinstance(cap, int) else _DEFAULT_OUT
        return self._price_cost(self._model(row), prompt, out) or 0.0

    def reserve(self, row: BatchRow) -> bool:
        """Admit ``row`` if the projected total stays within the budget."""
        est = self.estimate(row)
        if self.max_cost is not None and self.total + self.inflight_estimate + est > self.max_cost:
            return False
        self._inflight[row.custom_id] = est
        return True

    def release(self, row: BatchRow) -> None:
        self._inflight.pop(row.custom_id, None)

    def record(
        self, row: BatchRow, prompt_tokens: int, completion_tokens: int, model: str | None
    ) -> float | None:
        """Count a finished row's usage; returns its cost (None if unpriced)."""
        self.release(row)
        self.prompt_tokens += prompt_tokens
        self.completion_tokens += completion_tokens
        self._chars += row.prompt_chars
        self._ptok += prompt_tokens
        if row.url != "/v1/embeddings":
            self._ctok += completion_tokens
            self._rows += 1
        name = self._model(row) or model
        cost = self._price_cost(name, prompt_tokens, completion_tokens)
        if cost is None and model and model != name:
            cost = self._price_cost(model, prompt_tokens, completion_tokens)
        if cost is None:
            self.unpriced.add(name or "?")
            return None
        self.spent += cost
        return cost
