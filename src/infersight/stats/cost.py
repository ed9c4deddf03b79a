"""Cost of a run: $ per run, per million output tokens and per day, per level.

Cost is counted from usage (docs/design.md section 2): a request is billed when it
completed or the server reported its usage. ``bench`` prices a run once with
:func:`price_run` and stores the result (``aggregates[level]["cost"]`` and
``RunResult.cost``); the report shows what is stored and prices a file that holds no
cost with the same :func:`level_cost`, so both always use the same keys and numbers:
``usd``, ``usd_per_million_output_tokens`` and ``projected_usd_per_day``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from infersight.core.errors import ConfigError
from infersight.core.pricing import Price, PriceTable
from infersight.core.records import RequestRecord, RunResult

__all__ = ["level_cost", "price_run", "run_model", "run_price"]


def run_model(result: RunResult) -> str | None:
    """The model a run measured: its config, its engine, else its records' labels."""
    for key in ("model", "served_model"):
        v = result.config.get(key)
        if isinstance(v, str) and v:
            return v
    eng = result.config.get("engine")
    if isinstance(eng, dict) and isinstance(eng.get("model_name"), str):
        return str(eng["model_name"])
    for r in result.records[:100]:
        if "model" in r.labels:
            return r.labels["model"]
    return None


def run_price(result: RunResult) -> tuple[Price | None, str]:
    """The price of a run's tokens and where it came from; None when nothing prices it.

    In order: the run's ``--price-in``/``--price-out``, a ``price`` in its config, the
    price table (the run's ``--prices`` file, else the shipped one) for its model.
    """
    cfg = result.config
    p_in, p_out = cfg.get("price_in"), cfg.get("price_out")
    if isinstance(p_in, int | float) and isinstance(p_out, int | float):
        flat = PriceTable.flat(float(p_in), float(p_out)).price(None)
        return flat, "price from the run's --price-in/--price-out"
    price = cfg.get("price")
    if isinstance(price, dict) and {"input", "output"} <= set(price):
        return Price(float(price["input"]), float(price["output"])), "price from the run config"
    model = run_model(result)
    if model is None:
        return None, ""
    table_file = cfg.get("prices") if isinstance(cfg.get("prices"), str) else None
    try:
        found = PriceTable.load(table_file).price(model)
    except ConfigError:  # the run's price file is not on this machine: shipped table
        found = PriceTable.load(None).price(model)
    if found is None:
        return None, f"no price for model {model!r} in the price table"
    note = f" ({found.note})" if found.note else ""
    return found, f"price table entry for {model}{note}"


def _billed(records: Iterable[RequestRecord]) -> tuple[int, int]:
    """Prompt and output tokens of the requests that completed or reported usage."""
    prompt = output = 0
    for r in records:
        if r.ok or r.completion_tokens is not None:
            prompt += r.prompt_tokens or 0
            output += r.output_tokens
    return prompt, output


def level_cost(
    records: Sequence[RequestRecord], agg: dict[str, Any], price: Price
) -> dict[str, float | None]:
    """$ for one level's billed requests, per million output tokens, and per day.

    A day is projected at the level's measured request throughput, at the mean cost
    of the requests its window's statistics cover.
    """
    prompt, output = _billed(records)
    usd = price.cost(prompt, output)
    per_day = None
    tokens, n_win = agg.get("tokens") or {}, (agg.get("requests") or {}).get("in_window")
    tput = agg.get("request_throughput")
    if n_win and isinstance(tput, int | float) and tput > 0:
        per_req = price.cost(tokens.get("prompt") or 0, tokens.get("output") or 0) / n_win
        per_day = per_req * tput * 86400.0
    return {
        "usd": usd,
        "usd_per_million_output_tokens": usd / output * 1e6 if output else None,
        "projected_usd_per_day": per_day,
    }


def price_run(result: RunResult) -> dict[str, Any] | None:
    """Price every level and the run; store them in the result; None when unpriced.

    Each level's cost goes into ``aggregates[level]["cost"]`` and the run's into
    ``result.cost``. The run's $/day is that of the level with the highest output
    throughput: what a day at the best measured operating point would cost.
    """
    price, _ = run_price(result)
    if price is None:
        return None
    by_level: dict[str, list[RequestRecord]] = {name: [] for name in result.aggregates}
    for r in result.records:
        level = r.labels.get("level")
        if level in by_level:
            by_level[level].append(r)
    levels = {}
    for name, agg in result.aggregates.items():
        levels[name] = agg["cost"] = level_cost(by_level[name], agg, price)
    usd = sum(c["usd"] or 0.0 for c in levels.values())
    output = sum(_billed(recs)[1] for recs in by_level.values())
    best = max(
        (n for n, c in levels.items() if c["projected_usd_per_day"] is not None),
        key=lambda n: result.aggregates[n].get("output_token_throughput") or 0.0,
        default=None,
    )
    result.cost = {
        "model": run_model(result),
        "price_per_million": {"input": price.input, "output": price.output, "note": price.note},
        "usd": usd,
        "usd_per_million_output_tokens": usd / output * 1e6 if output else None,
        "projected_usd_per_day": None if best is None else levels[best]["projected_usd_per_day"],
        "projected_at_level": best,
        "levels": levels,
    }
    return result.cost
