"""Cost of a run: $ per run, per million output tokens and per day, per level.

``bench`` records the cost it computed (``aggregates[level]["cost"]`` and the
RunResult's extra ``cost`` field); the report shows that when present, and otherwise
prices the records' usage from the run's flags or the price table.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from infersight.core.records import RequestRecord, RunResult

__all__ = ["level_cost", "model_name", "run_cost_note", "run_price"]


def model_name(result: RunResult) -> str | None:
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


def run_price(result: RunResult) -> tuple[tuple[float, float] | None, str]:
    """($/Mtok in, $/Mtok out) and where it came from; None when nothing prices it."""
    cfg = result.config
    p_in, p_out = cfg.get("price_in"), cfg.get("price_out")
    if isinstance(p_in, int | float) and isinstance(p_out, int | float):
        return (float(p_in), float(p_out)), "price from the run's --price-in/--price-out"
    price = cfg.get("price")
    if isinstance(price, dict) and {"input", "output"} <= set(price):
        return (float(price["input"]), float(price["output"])), "price from the run config"
    model = model_name(result)
    if model is None:
        return None, ""
    from infersight.core.errors import ConfigError
    from infersight.core.pricing import PriceTable

    table_file = cfg.get("prices") if isinstance(cfg.get("prices"), str) else None
    try:
        found = PriceTable.load(table_file).price(model)
    except ConfigError:  # the run's price file is not on this machine: shipped table
        found = PriceTable.load(None).price(model)
    if found is None:
        return None, f"no price for model {model!r} in the price table"
    note = f" ({found.note})" if found.note else ""
    return (found.input, found.output), f"price table entry for {model}{note}"


#: Key names of the cost that ``bench`` stores per level, and the report's own names.
_COST_KEYS = {
    "run_usd": ("usd", "run_usd"),
    "per_mtok_output_usd": ("usd_per_million_output_tokens", "per_mtok_output_usd"),
    "per_day_usd": ("projected_usd_per_day", "per_day_usd"),
}


def _stored_cost(d: dict[str, Any]) -> dict[str, float]:
    out = {}
    for key, names in _COST_KEYS.items():
        v = next((d[n] for n in names if isinstance(d.get(n), int | float)), None)
        out[key] = math.nan if v is None else float(v)
    return out


def run_cost_note(result: RunResult) -> str | None:
    """The price note of the cost ``bench`` stored (``RunResult.cost``)."""
    cost = result.cost if result.cost is not None else (result.model_extra or {}).get("cost")
    if not isinstance(cost, dict):
        return None
    p = cost.get("price_per_million") or {}
    note = f" ({p['note']})" if p.get("note") else ""
    return (
        f"cost recorded by the run for {cost.get('model', 'the model')}: "
        f"${p.get('input', '?')}/Mtok input, ${p.get('output', '?')}/Mtok output{note}"
    )


def level_cost(
    records: Sequence[RequestRecord],
    agg: dict[str, Any],
    span: tuple[float, float],
    price: tuple[float, float] | None,
) -> dict[str, float] | None:
    """$ per run, per million output tokens and per day of one level.

    The cost ``bench`` stored in the aggregate wins; else it is computed from the
    records' usage and ``price`` ($/Mtok in, out); None when nothing prices the run.
    """
    stored = agg
    if isinstance(stored.get("cost"), dict):
        return _stored_cost(stored["cost"])
    if price is None:
        return None
    done = [r for r in records if r.ok or r.completion_tokens is not None]
    prompt = sum(r.prompt_tokens or 0 for r in done)
    output = sum(r.output_tokens for r in done)
    run = (prompt * price[0] + output * price[1]) / 1e6
    # $/day at the measured rate: the cost of a completed request times the level's
    # request throughput (completions over its throughput span), over 24 h.
    tput = agg.get("request_throughput")
    if isinstance(tput, int | float) and tput > 0 and done:
        per_s = run / len(done) * tput
    else:
        length = span[1] - span[0]
        per_s = run / length if length > 0 else math.nan
    return {
        "run_usd": run,
        "per_mtok_output_usd": (run / output * 1e6) if output else math.nan,
        "per_day_usd": per_s * 86400.0,
    }
