"""Cost projection and the --max-cost guard."""

from __future__ import annotations

from infersight.batch.budget import CostMeter
from infersight.batch.input import BatchRow
from infersight.core.pricing import PriceTable


def row(i: int, chars: int = 400, max_tokens: int | None = 100) -> BatchRow:
    body: dict[str, object] = {"model": "m", "messages": [{"role": "user", "content": "x" * chars}]}
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    return BatchRow(f"r{i}", "/v1/chat/completions", body, i, chars)


def test_estimate_uses_max_tokens_then_observed_output() -> None:
    m = CostMeter(PriceTable.flat(1_000_000, 1_000_000))  # $1 per token: easy numbers
    assert m.estimate(row(0)) == 101 + 100  # 400 chars / 4 + 1, and max_tokens
    for i in range(5):
        m.record(row(i), prompt_tokens=200, completion_tokens=10, model="m")
    # calibrated: 2 chars per token -> 201 prompt; output 10 * 1.1 + 1 = 12
    assert m.estimate(row(9)) == 201 + 12
    assert m.spent == 5 * 210 and m.prompt_tokens == 1000 and m.completion_tokens == 50


def test_reserve_stops_before_the_budget_is_exceeded() -> None:
    m = CostMeter(PriceTable.flat(1_000_000, 1_000_000), max_cost=1010.0, prior_cost=100.0)
    admitted = 0
    while m.reserve(row(admitted)):
        admitted += 1
    assert admitted == 4  # 100 prior + 4 * 201 = 904; a fifth would be 1105
    assert m.total + m.inflight_estimate <= 1010.0
    m.record(row(0), 100, 0, "m")  # 100 instead of 201: room for one more
    assert m.reserve(row(99))


def test_unpriced_model_is_reported_not_invented() -> None:
    m = CostMeter(PriceTable({}))
    assert m.record(row(0), 10, 10, "m") is None
    assert m.unpriced == {"m"} and m.spent == 0.0
