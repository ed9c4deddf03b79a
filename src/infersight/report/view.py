"""Turns a RunResult into what the report shows: levels, aggregates, verdicts, cost.

Everything here is computed once per result and shared by the HTML and Markdown
renderers, so both always print the same numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from infersight.core.records import RequestRecord, RunResult
from infersight.core.verdicts import Verdict
from infersight.stats.aggregate import aggregate
from infersight.stats.chunks import Chunks, FloatArray, flatten_chunks, itl_from_chunks
from infersight.stats.cost import level_cost, run_model, run_price
from infersight.stats.validity import check_level

__all__ = [
    "NOT_DIAGNOSED",
    "LevelView",
    "RunView",
    "build_view",
    "build_views",
    "level_aggregate",
    "no_price_text",
]

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
    cost: dict[str, float | None] | None = None
    util: dict[str, float] = field(default_factory=dict)
    _cache: dict[str, tuple[FloatArray, FloatArray | None]] = field(
        default_factory=dict, repr=False
    )
    _chunks: Chunks | None = field(default=None, repr=False)

    def in_stats(self) -> list[bool]:
        """Which records the level's statistics cover: those sent inside its window.

        The CDFs use the same requests as the tables (docs/design.md section 2).
        """
        w = self.agg.get("window") or {}
        lo, hi = w.get("start"), w.get("end")
        if not w.get("steady") or not isinstance(lo, float) or not isinstance(hi, float):
            return [True] * len(self.records)
        return [lo <= r.scheduled <= hi for r in self.records]

    def ok_values(self, attr: str) -> FloatArray:
        """Values of a per-record metric (``ttft``, ``e2e``...) over successful requests
        of the level's window."""
        if attr not in self._cache:
            mask = self.in_stats()
            vals = [
                v
                for r, m in zip(self.records, mask, strict=True)
                if m and r.ok and (v := getattr(r, attr)) is not None
            ]
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
            ok = np.fromiter(
                (r.ok and m for r, m in zip(self.records, self.in_stats(), strict=True)),
                bool,
                len(self.records),
            )
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
    verdicts: list[Verdict]
    diagnosis_note: str = ""
    price_note: str = ""
    #: Utilisation series (percent) by source, times from the run start.
    util: dict[str, tuple[FloatArray, FloatArray]] = field(default_factory=dict)

    @property
    def model(self) -> str | None:
        return run_model(self.result)

    @property
    def priced(self) -> bool:
        """True when some level has a price above $0 (a $0 table entry, e.g. the local
        embedded engine, says nothing about the cost of the hardware)."""
        return any((lv.cost or {}).get("usd_per_million_output_tokens") for lv in self.levels)


def no_price_text(view: RunView) -> str:
    """What the outputs say instead of a $0 cost, in plain words: no price for the
    model, and how to give one (a $0 entry, e.g. the local embedded engine's, prices
    nothing: the hardware is not free, the table just does not know its cost)."""
    stored = view.result.cost if isinstance(view.result.cost, dict) else {}
    model = view.model or stored.get("model")
    who = f"for {model}" if model else "for this run's model"
    return f"no price {who}: give one with `--price-in`/`--price-out` or a price file (`--prices`)"


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


#: What the report says for a run without verdicts (it never diagnoses by itself).
NOT_DIAGNOSED = (
    "not diagnosed: run `infersight diagnose FILE` (or `infersight report FILE`, which "
    "diagnoses a file that holds no verdicts)"
)


def _stored_price_note(result: RunResult) -> str | None:
    """Where the cost ``bench`` stored (``RunResult.cost``) took its price from."""
    cost = result.cost
    if not isinstance(cost, dict):
        return None
    p = cost.get("price_per_million") or {}
    note = f" ({p['note']})" if p.get("note") else ""
    return (
        f"cost recorded by the run for {cost.get('model', 'the model')}: "
        f"${p.get('input', '?')}/Mtok input, ${p.get('output', '?')}/Mtok output{note}"
    )


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
    # Time zero: the first intended send, else the first sample (a monitor recording).
    t0 = min((r.scheduled for r in result.records), default=None)
    if t0 is None:
        t0 = min((s.t for s in result.samples), default=0.0)
    price, price_note = run_price(result)
    price_note = _stored_price_note(result) or price_note
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
        stored_cost = lv.agg.get("cost")
        if isinstance(stored_cost, dict):  # what bench priced (and printed)
            lv.cost = stored_cost
        elif price is not None:
            lv.cost = level_cost(recs, lv.agg, price)
        _util_means(lv, util)
        levels.append(lv)
    return RunView(
        result,
        label or result.run_id or "run",
        t0,
        levels,
        list(result.diagnosis),
        diagnosis_note="" if result.diagnosis else NOT_DIAGNOSED,
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


def level_aggregate(
    stored: Any, records: Sequence[RequestRecord], level: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The aggregate the run stored (what the console printed), else recomputed.

    Recomputing uses the same ``stats.aggregate.aggregate`` as ``bench``, with the level's
    target concurrency or rate from ``config["levels"]``, so the numbers agree.
    """
    if isinstance(stored, dict) and stored:
        if "validity" not in stored and records:
            return {**stored, "validity": _validity(stored, records)}
        return stored
    level = level or {}
    conc, rate = level.get("concurrency"), level.get("rate")
    out: dict[str, Any] = aggregate(
        list(records),
        target_concurrency=int(conc) if isinstance(conc, int | float) else None,
        target_rate=float(rate) if isinstance(rate, int | float) else None,
    )
    return out


def _validity(stored: dict[str, Any], records: Sequence[RequestRecord]) -> list[dict[str, Any]]:
    """A file written before levels carried ``validity``: its checks, from its records
    (the window's members by intended send time, as bench chose them)."""
    w = stored.get("window") or {}
    lo, hi = w.get("start"), w.get("end")
    members = (
        records if lo is None or hi is None else [r for r in records if lo <= r.scheduled <= hi]
    )
    return check_level(records, members, stored)
