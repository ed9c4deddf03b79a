"""Cost from usage: one function prices a run for bench and for the report."""

from __future__ import annotations

from infersight.core.pricing import Price
from infersight.core.records import RequestRecord, RunResult
from infersight.stats.aggregate import aggregate
from infersight.stats.cost import level_cost, price_run, run_price


def _records(n: int = 10) -> list[RequestRecord]:
    return [
        RequestRecord(
            f"c=2-{i}",
            i * 0.5,
            sent=i * 0.5,
            chunk_times=[i * 0.5 + 0.05, i * 0.5 + 0.06],
            chunk_tokens=[1, 1],
            end=i * 0.5 + 0.06,
            status=200,
            ok=True,
            prompt_tokens=100,
            completion_tokens=2,
            labels={"level": "c=2"},
        )
        for i in range(n)
    ]


def _result(**config: object) -> RunResult:
    recs = _records()
    return RunResult(
        records=recs, aggregates={"c=2": aggregate(recs)}, config={"model": "m", **config}
    )


def test_price_run_stores_the_run_and_level_cost() -> None:
    r = _result(price_in=1.0, price_out=10.0)
    cost = price_run(r)
    assert cost is not None and r.cost is cost
    assert abs(cost["usd"] - (1000 * 1.0 + 20 * 10.0) / 1e6) < 1e-12
    assert abs(cost["usd_per_million_output_tokens"] - cost["usd"] / 20 * 1e6) < 1e-9
    assert cost["price_per_million"] == {
        "input": 1.0,
        "output": 10.0,
        "note": "flat price from flags",
    }
    level = r.aggregates["c=2"]["cost"]
    assert cost["levels"]["c=2"] is level and level["projected_usd_per_day"] > 0
    assert cost["projected_at_level"] == "c=2"
    assert price_run(_result()) is None  # model "m" has no price in the shipped table


def test_only_completed_or_usage_reporting_requests_are_billed() -> None:
    recs = _records(2)
    cut = RequestRecord(
        "cut",
        2.0,
        sent=2.0,
        chunk_times=[2.1, 2.2],
        chunk_tokens=[1, 1],
        end=2.2,
        status=200,
        ok=False,
        error="TruncatedStream",
    )
    usage = RequestRecord(
        "usage",
        3.0,
        sent=3.0,
        status=200,
        ok=False,
        error="X",
        prompt_tokens=50,
        completion_tokens=0,
    )
    cost = level_cost([*recs, cut, usage], aggregate(recs), Price(1.0, 1.0))
    assert cost["usd"] == (2 * 102 + 50) / 1e6
    assert cost["usd_per_million_output_tokens"] == cost["usd"] / 4 * 1e6


def test_where_the_price_comes_from() -> None:
    price, note = run_price(_result(price_in=2.0, price_out=3.0))
    assert price == Price(2.0, 3.0, "flat price from flags") and "--price-in" in note
    price, note = run_price(_result(price={"input": 1, "output": 4}))
    assert price is not None and (price.input, price.output) == (1.0, 4.0)
    price, note = run_price(_result())
    assert price is None and "no price for model 'm'" in note
