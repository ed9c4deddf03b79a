"""Turns a RunResult into what the report shows: levels, aggregates, verdicts, cost.

Everything here is computed once per result and shared by the HTML and Markdown
renderers, so both always print the same numbers.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from infersight.core.records import RequestRecord, RunResult
from infersight.report.aggregates import (
    Chunks,
    FloatArray,
    flatten_chunks,
    itl_from_chunks,
    level_aggregate,
)

__all__ = ["LevelView", "RunView", "build_view", "build_views"]

#: Label used when records carry no ``labels["level"]``.
DEFAULT_LEVEL = "run"


@dataclass
class LevelView:
    """One load level: its records, aggregate and latency arrays for the CDFs."""

    name: str
    records: list[RequestRecord]
    agg: dict[str, Any]
    #: Seconds from the run start: first scheduled to last finish.
    span: tuple[float, float]
    cost: dict[str, float] | None = None
    util: dict[str, float] = field(default_factory=dict)
    _cache: dict[str, tuple[FloatArray, FloatArray | None]] = field(
        default_factory=dict, repr=False
    )
    _chunks: Chunks | None = field(default=None, repr=False)

    def ok_values(self, attr: str) -> FloatArray:
        """Values of a per-record metric (``ttft``, ``e2e``...) over successful requests."""
        if attr not in self._cache:
            vals = [v for r in self.records if r.ok and (v := getattr(r, attr)) is not None]
            self._cache[attr] = (np.asarray(vals, dtype=np.float64), None)
        return self._cache[attr][0]

    def chunks(self) -> Chunks:
        """All content chunks of the level's records, flattened once and cached."""
        if self._chunks is None:
            self._chunks = flatten_chunks(self.records)
        return self._chunks

    def itl(self) -> tuple[FloatArray, FloatArray]:
        """Pooled inter-chunk gaps of successful requests and their token weights."""
        if "itl" not in self._cache:
            ok = np.fromiter((r.ok for r in self.records), bool, len(self.records))
            self._cache["itl"] = itl_from_chunks(self.chunks().select(ok))
        vals, weights = self._cache["itl"]
        assert weights is not None
        return vals, weights


@dataclass
class RunView:
    """Everything the report needs from one RunResult."""

    result: RunResult
    label: str
    t0: float
    levels: list[LevelView]
    verdicts: list[dict[str, Any]]
    diagnosis_note: str = ""
    price_note: str = ""
    #: Utilisation series (percent) by source, times from the run start.
    util: dict[str, tuple[FloatArray, FloatArray]] = field(default_factory=dict)

    @property
    def model(self) -> str | None:
        return model_name(self.result)


def record_end(r: RequestRecord) -> float:
    """The last moment known for a record (its end, or the latest timestamp it has)."""
    if r.end is not None:
        return r.end
    for t in (r.chunk_times[-1] if r.chunk_times else None, r.headers, r.sent):
        if t is not None:
            return t
    return r.scheduled


def level_order(result: RunResult) -> list[str]:
    """Level names in the configured order, then any others in order of appearance."""
    names: list[str] = []
    for lv in result.config.get("levels") or []:
        if isinstance(lv, dict) and lv.get("name") is not None:
            names.append(str(lv["name"]))
    seen = set(names)
    for r in result.records:
        name = r.labels.get("level", DEFAULT_LEVEL)
        if name not in seen:
            seen.add(name)
            names.append(name)
    return names


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


def _price(result: RunResult) -> tuple[tuple[float, float] | None, str]:
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


def _run_cost_note(result: RunResult) -> str | None:
    """The price note of the cost ``bench`` stored (the RunResult's extra ``cost``)."""
    cost = (result.model_extra or {}).get("cost")
    if not isinstance(cost, dict):
        return None
    p = cost.get("price_per_million") or {}
    note = f" ({p['note']})" if p.get("note") else ""
    return (
        f"cost recorded by the run for {cost.get('model', 'the model')}: "
        f"${p.get('input', '?')}/Mtok input, ${p.get('output', '?')}/Mtok output{note}"
    )


def _level_cost(
    lv: LevelView, price: tuple[float, float] | None, stored: dict[str, Any]
) -> dict[str, float] | None:
    if isinstance(stored.get("cost"), dict):
        return _stored_cost(stored["cost"])
    if price is None:
        return None
    done = [r for r in lv.records if r.ok or r.completion_tokens is not None]
    prompt = sum(r.prompt_tokens or 0 for r in done)
    output = sum(r.output_tokens for r in done)
    run = (prompt * price[0] + output * price[1]) / 1e6
    window = lv.agg.get("window") or {}
    length = (window.get("end") or 0.0) - (window.get("start") or 0.0)
    if length <= 0:
        length = lv.span[1] - lv.span[0]
    # $/day at the measured rate: the window's spend rate projected over 24 h.
    n_win = (lv.agg.get("requests") or {}).get("in_window") or len(lv.records)
    per_s = run * (n_win / max(len(lv.records), 1)) / length if length > 0 else math.nan
    return {
        "run_usd": run,
        "per_mtok_output_usd": (run / output * 1e6) if output else math.nan,
        "per_day_usd": per_s * 86400.0,
    }


def _diagnosis(result: RunResult) -> tuple[list[dict[str, Any]], str]:
    if result.diagnosis:
        return list(result.diagnosis), ""
    try:
        diagnose = getattr(importlib.import_module("infersight.diagnose"), "diagnose", None)
    except ImportError:
        diagnose = None
    if diagnose is None:
        return [], "diagnosis not available in this installation"
    try:
        verdicts = diagnose(result)
    except Exception as e:  # a report must still render when diagnosis fails
        return [], f"diagnosis failed: {type(e).__name__}: {e}"
    out: list[dict[str, Any]] = []
    for v in verdicts:
        dump = getattr(v, "model_dump", None)
        out.append(dump() if callable(dump) else dict(v))
    return out, "diagnosed by this report (the run had no embedded diagnosis)"


def _util_means(lv: LevelView, util: dict[str, tuple[FloatArray, FloatArray]]) -> None:
    lo, hi = lv.span
    for name, (ts, vs) in util.items():
        m = (ts >= lo) & (ts <= hi)
        if m.any():
            lv.util[name] = float(np.mean(vs[m]))


def utilisation_series(result: RunResult, t0: float) -> dict[str, tuple[FloatArray, FloatArray]]:
    """Utilisation in percent per source, times relative to ``t0``.

    GPU utilisation and SM activity (0..1 -> %) per GPU; host CPU (all cores, %); each
    watched process's CPU (% of one core).
    """
    acc: dict[str, tuple[list[float], list[float]]] = {}
    for s in result.samples:
        if s.value is None:
            continue
        if s.name in ("gpu.utilization", "gpu.sm_activity"):
            what = "GPU util" if s.name == "gpu.utilization" else "SM activity"
            key, val = f"{what} gpu{s.labels.get('gpu', '0')}", s.value * 100.0
        elif s.name == "host.cpu_percent":
            if s.labels.get("cpu", "all") != "all":
                continue
            key, val = "host CPU", s.value
        elif s.name == "process.cpu_percent":
            key, val = f"{s.labels.get('name', s.labels.get('pid', '?'))} CPU (% core)", s.value
        else:
            continue
        ts, vs = acc.setdefault(key, ([], []))
        ts.append(s.t - t0)
        vs.append(val)
    return {k: (np.asarray(t), np.asarray(v)) for k, (t, v) in sorted(acc.items())}


def build_view(result: RunResult, label: str | None = None) -> RunView:
    """Group records by level and compute what the report shows."""
    by_level: dict[str, list[RequestRecord]] = {n: [] for n in level_order(result)}
    for r in result.records:
        by_level[r.labels.get("level", DEFAULT_LEVEL)].append(r)
    t0 = min((r.scheduled for r in result.records), default=0.0)
    price, price_note = _price(result)
    price_note = _run_cost_note(result) or price_note
    util = utilisation_series(result, t0)
    specs = {
        str(lv["name"]): lv
        for lv in result.config.get("levels") or []
        if isinstance(lv, dict) and lv.get("name") is not None
    }
    levels: list[LevelView] = []
    for name, recs in by_level.items():
        stored = result.aggregates.get(name)
        if not recs and not stored:
            continue
        span = (
            (min(r.scheduled for r in recs) - t0, max(record_end(r) for r in recs) - t0)
            if recs
            else (0.0, 0.0)
        )
        lv = LevelView(name, recs, level_aggregate(stored, recs, specs.get(name)), span)
        lv.cost = _level_cost(lv, price, stored if isinstance(stored, dict) else {})
        _util_means(lv, util)
        levels.append(lv)
    verdicts, note = _diagnosis(result)
    return RunView(
        result,
        label or result.run_id or "run",
        t0,
        levels,
        verdicts,
        diagnosis_note=note,
        price_note=price_note,
        util=util,
    )


def build_views(results: Sequence[RunResult], labels: Sequence[str] | None = None) -> list[RunView]:
    """Views for several results, labels made unique for the comparison."""
    views = []
    seen: dict[str, int] = {}
    for i, res in enumerate(results):
        base = (labels[i] if labels and i < len(labels) else None) or res.run_id or f"run {i + 1}"
        seen[base] = seen.get(base, 0) + 1
        views.append(build_view(res, base if seen[base] == 1 else f"{base} ({seen[base]})"))
    return views
