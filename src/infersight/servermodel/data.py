"""What the model is fitted from: a run's requests as arrays, and its levels.

Per request: the level, intended send (``scheduled``), ``sent``, first and last content
chunk, ``end``, prompt and output tokens, success. Per level: its load (closed-loop
clients or open-loop rate), whether the load generator limited it, its error share
and its measured figures (from the stored aggregates, as every output shows them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from infersight.core.numbers import as_float, number_at
from infersight.core.records import RunResult, Sample
from infersight.core.verdicts import Q_SUSTAINED
from infersight.stats.aggregate import aggregate
from infersight.stats.level_flags import RATE_RATIO_LIMIT, flagged

__all__ = ["LevelData", "RunData", "level_figures", "level_rate", "merge_runs", "run_data"]


@dataclass(slots=True)
class LevelData:
    """One load level: its load, its records (indices into RunData) and figures."""

    name: str
    idx: np.ndarray
    concurrency: int | None
    rate: float | None
    #: The level's client-limited flag (as every output shows it).
    client_limited: bool
    #: The load generator was the limit, not only late: it fell short of the rate asked
    #: (5% or more) while the server kept up with what it sent, used over 90% of a
    #: core, or its lag outgrew the server's first token; and requests did not wait in
    #: the engine through it (its own scrapes). Such a level says nothing about the
    #: server and is not fitted; one that was only late is, since the model replays the
    #: times requests were really sent.
    at_ceiling: bool
    sustainable: bool | None
    figures: dict[str, float | None]
    #: The aggregate as stored (window, slo, ...).
    agg: dict[str, Any] = field(default_factory=dict)
    #: The slot limit this level ran with, when it differs by level (tune's trials).
    slots: float | None = None

    @property
    def closed(self) -> bool:
        return self.concurrency is not None


@dataclass(slots=True)
class RunData:
    """A run's requests as arrays (NaN where a time is missing)."""

    level: np.ndarray
    scheduled: np.ndarray
    sent: np.ndarray
    first: np.ndarray
    last: np.ndarray
    end: np.ndarray
    prompt: np.ndarray
    output: np.ndarray
    ok: np.ndarray
    levels: list[LevelData]
    #: The slot limit the user stated or the engine exports (None: unknown).
    stated_slots: float | None
    stated_source: str
    #: Engine KV usage scrapes: times and usage (0..1); empty when not exported.
    kv_t: np.ndarray
    kv_u: np.ndarray
    slo: dict[str, float]
    #: The most the engine ran at a scrape where requests waited in it and its KV cache
    #: had room (None: never seen, several engines, or merged runs): an admission limit
    #: binds there, so no slot limit above it fits the run.
    running_while_waiting: float | None = None
    #: The engine's own running count at each scrape (one engine only; empty else).
    run_t: np.ndarray = field(default_factory=lambda: np.zeros(0))
    run_n: np.ndarray = field(default_factory=lambda: np.zeros(0))
    #: The engine's preemption counter per scrape (vLLM ``num_preemptions_total``).
    pre_t: np.ndarray = field(default_factory=lambda: np.zeros(0))
    pre_n: np.ndarray = field(default_factory=lambda: np.zeros(0))
    #: The max_tokens every request asked for (None: not stated): an engine that
    #: reserves KV at admission holds prompt + max_tokens, whatever the answer's length.
    max_tokens: float | None = None
    #: Closed-loop clients that send again at once (no sessions, no think time): the
    #: think time is known to be 0, not estimated from a level's turnaround.
    no_think: bool = False
    #: The KV cache's size in tokens as the engine exports it (vLLM's
    #: ``cache_config_info``), None when it does not.
    kv_exported: float | None = None
    #: Tokens per KV block, the unit the engine allocates (vLLM's ``block_size``; 1:
    #: not exported).
    kv_block: float = 1.0

    def subset(self, names: set[str]) -> np.ndarray:
        """Indices of the requests of these levels."""
        keep = [lv.idx for lv in self.levels if lv.name in names]
        return np.concatenate(keep) if keep else np.zeros(0, dtype=int)


def level_figures(agg: dict[str, Any]) -> dict[str, float | None]:
    """The figures the model predicts, as bench reported them for a level."""
    return {
        "throughput": as_float(agg.get("request_throughput")),
        "goodput": as_float(agg.get("goodput"))
        if not isinstance(agg.get("goodput"), dict)
        else as_float(agg["goodput"].get("rate")),
        "ttft_p50": as_float(number_at(agg, "ttft", "p50")),
        "ttft_p99": as_float(number_at(agg, "ttft", "p99")),
        "tpot_p50": as_float(number_at(agg, "tpot", "p50")),
        "e2e_p50": as_float(number_at(agg, "e2e", "p50")),
        "e2e_p99": as_float(number_at(agg, "e2e", "p99")),
    }


def _at_ceiling(
    agg: dict[str, Any], scheduled: np.ndarray, sent: np.ndarray, engine_queued: bool
) -> bool:
    """Whether the load generator, not the server, set the level's pace: its sends
    fell 5% or more behind its own schedule (while the server kept up with them), it
    used over 90% of a core, or its lag outgrew the server's first token. Never where
    the engine's own scrapes show requests waiting in it through the level: a late
    client only offered less than it meant, and the server still queued what came."""
    if not flagged(agg) or engine_queued:
        return False
    ok = np.isfinite(sent)
    behind = False
    # A server that answered fewer requests a second than the late client really sent
    # set the pace itself: its queue grew at the rate really offered, which the model
    # replays. Sends starved of the cores the client shares with the server fall behind
    # this way. (The level's sustainability counts the client's held sends as queued.)
    sends, answers = as_float(agg.get("achieved_rate")), as_float(agg.get("request_throughput"))
    server_behind = bool(sends and answers is not None and answers < RATE_RATIO_LIMIT * sends)
    if ok.sum() > 2 and not server_behind:
        meant = float(np.ptp(scheduled[ok]))
        took = float(np.ptp(sent[ok]))
        behind = meant > 0 and took > meant / RATE_RATIO_LIMIT
    cpu = as_float(agg.get("loadgen_cpu_percent"))
    lag, ttft = (
        as_float(number_at(agg, "schedule_lag", "p99")),
        as_float(number_at(agg, "ttft_from_sent", "p50")),
    )
    return bool(
        behind
        or (cpu is not None and cpu > 90.0)
        or (lag is not None and ttft is not None and lag > ttft)
    )


def _stated_slots(result: RunResult, engine_slots: int | None) -> tuple[float | None, str]:
    if engine_slots:
        return float(engine_slots), "stated (--engine-slots)"
    at_bench = result.config.get("engine_slots")
    if isinstance(at_bench, int | float) and at_bench > 0:
        return float(at_bench), "stated at bench time (--engine-slots)"
    vals = [s.value for s in result.samples if s.name == "engine.slots" and s.value]
    if vals:
        return float(max(vals)), "the engine's own export (engine.slots)"
    return None, ""


#: KV usage at or above which a queue may be the KV cache's, not the slots'.
_KV_FULL = 0.9
_BUSY = ("engine.requests_running", "engine.requests_waiting", "engine.kv_cache_usage")


def _running_while_waiting(samples: Sequence[Sample]) -> float | None:
    """The most one engine ran at the scrapes where requests waited in it and its KV
    cache had room (running, waiting and KV usage come from the same scrape)."""
    seen: dict[str, dict[tuple[float, tuple[tuple[str, str], ...]], float]] = {}
    for smp in samples:
        if smp.name in _BUSY and smp.value is not None:
            key = (smp.t, tuple(sorted(smp.labels.items())))
            seen.setdefault(smp.name, {})[key] = float(smp.value)
    running = seen.get("engine.requests_running", {})
    waiting = seen.get("engine.requests_waiting", {})
    kv = seen.get("engine.kv_cache_usage", {})
    if len({labels for _, labels in running}) != 1:
        return None  # replicas are scraped at different instants: no one count
    busy = [
        r
        for key, r in running.items()
        if waiting.get(key, 0.0) >= 1 and kv.get(key, 0.0) < _KV_FULL and r >= 1
    ]
    return max(busy) if busy else None


def _engine_running(samples: Sequence[Sample]) -> tuple[np.ndarray, np.ndarray]:
    """The engine's running count per scrape, when one engine was scraped."""
    pts = [s for s in samples if s.name == "engine.requests_running" and s.value is not None]
    if len({tuple(sorted(s.labels.items())) for s in pts}) != 1:
        return np.zeros(0), np.zeros(0)
    return (
        np.asarray([s.t for s in pts], dtype=float),
        np.asarray([s.value for s in pts], dtype=float),
    )


def _span(sent: np.ndarray, end: np.ndarray) -> tuple[float, float]:
    """A level's span: its first send to its last end (its first send when none ended)."""
    t0 = float(np.nanmin(sent)) if np.isfinite(sent).any() else 0.0
    return t0, float(np.nanmax(end)) if np.isfinite(end).any() else t0


def _queued(t: np.ndarray, waiting: np.ndarray, span: tuple[float, float]) -> bool:
    """Whether requests waited in the engine at half or more of its scrapes in ``span``
    (the queue rules' "sustained", docs/design.md section 5; two scrapes at least)."""
    inside = (t >= span[0]) & (t <= span[1])
    n = int(np.count_nonzero(inside))
    return n >= 2 and float(np.count_nonzero(waiting[inside] >= 1)) >= Q_SUSTAINED * n


def _engine_counter(samples: Sequence[Sample], name: str) -> tuple[np.ndarray, np.ndarray]:
    """A counter's (or gauge's) value per scrape time, summed over its series."""
    by_t: dict[float, float] = {}
    for s in samples:
        if s.name == name and s.value is not None:
            by_t[s.t] = by_t.get(s.t, 0.0) + float(s.value)
    ts = np.asarray(sorted(by_t), dtype=float)
    return ts, np.asarray([by_t[t] for t in ts], dtype=float)


def level_rate(t: np.ndarray, n: np.ndarray, d: RunData, lv: LevelData) -> float | None:
    """A counter's increase per second over a level's span (None: fewer than two
    scrapes in it)."""
    if t.size < 2:
        return None
    t0, t1 = _span(d.sent[lv.idx], d.end[lv.idx])
    inside = (t >= t0) & (t <= t1)
    if np.count_nonzero(inside) < 2:
        return None
    tt, nn = t[inside], n[inside]
    return float(max(0.0, nn[-1] - nn[0]) / max(tt[-1] - tt[0], 1e-9))


def _stated_max_tokens(config: dict[str, Any]) -> float | None:
    v = as_float(config.get("max_tokens"))
    return v if v is not None and v > 0 and not config.get("dataset") else None


def run_data(result: RunResult, *, engine_slots: int | None = None) -> RunData:
    """The arrays of ``result`` (every record), with its levels in run order."""
    recs = result.records
    n = len(recs)
    nan = float("nan")

    def arr(values: Any) -> np.ndarray:
        return np.asarray(list(values), dtype=float) if n else np.zeros(0)

    names: list[str] = [
        str(lv["name"])
        for lv in result.config.get("levels") or []
        if isinstance(lv, dict) and lv.get("name")
    ]
    labels = [r.labels.get("level") or "" for r in recs]
    for lab in labels:
        if lab and lab not in names:
            names.append(lab)
    specs = {
        str(lv.get("name")): lv for lv in result.config.get("levels") or [] if isinstance(lv, dict)
    }
    lab_arr = np.asarray(labels, dtype=object)
    sched_all = arr(r.scheduled for r in recs)
    sent_all = arr(r.sent if r.sent is not None else nan for r in recs)
    end_all = arr(r.end if r.end is not None else nan for r in recs)
    wait_t, wait_n = _engine_counter(result.samples, "engine.requests_waiting")
    levels: list[LevelData] = []
    for name in names:
        idx = np.flatnonzero(lab_arr == name)
        if not idx.size:
            continue
        agg = result.aggregates.get(name)
        spec = specs.get(name, {})
        conc, rate = spec.get("concurrency"), spec.get("rate")
        if not isinstance(agg, dict) or not agg.get("requests"):
            agg = aggregate(
                [recs[int(i)] for i in idx],
                target_concurrency=int(conc) if isinstance(conc, int) else None,
                target_rate=as_float(rate),
            )
        target = agg.get("target") if isinstance(agg.get("target"), dict) else {}
        sus = agg.get("sustainability") if isinstance(agg.get("sustainability"), dict) else {}
        c = (target or {}).get("concurrency", conc)
        r = (
            as_float((sus or {}).get("offered_rate"))
            or as_float((target or {}).get("rate"))
            or as_float(rate)
        )
        queued = _queued(wait_t, wait_n, _span(sent_all[idx], end_all[idx]))
        levels.append(
            LevelData(
                name=name,
                idx=idx,
                concurrency=int(c) if isinstance(c, int | float) and c else None,
                rate=r,
                client_limited=flagged(agg),
                at_ceiling=_at_ceiling(agg, sched_all[idx], sent_all[idx], queued),
                sustainable=(sus or {}).get("sustainable") if (sus or {}).get("judged") else None,
                figures=level_figures(agg),
                agg=agg,
            )
        )
    stated, source = _stated_slots(result, engine_slots)
    kv = [
        (s.t, s.value)
        for s in result.samples
        if s.name == "engine.kv_cache_usage" and s.value is not None
    ]
    slo = result.config.get("slo") if isinstance(result.config.get("slo"), dict) else {}
    run_t, run_n = _engine_running(result.samples)
    pre_t, pre_n = _engine_counter(result.samples, "engine.preemptions_total")
    return RunData(
        level=lab_arr,
        scheduled=arr(r.scheduled for r in recs),
        sent=arr(r.sent if r.sent is not None else r.scheduled for r in recs),
        first=arr(r.chunk_times[0] if r.chunk_times else nan for r in recs),
        last=arr(r.chunk_times[-1] if r.chunk_times else nan for r in recs),
        end=end_all,
        prompt=arr(r.prompt_tokens if r.prompt_tokens is not None else nan for r in recs),
        output=arr(r.output_tokens for r in recs),
        ok=np.asarray([r.ok for r in recs], dtype=bool),
        levels=levels,
        stated_slots=stated,
        stated_source=source,
        kv_t=np.asarray([t for t, _ in kv], dtype=float),
        kv_u=np.asarray([u for _, u in kv], dtype=float),
        slo={str(k): float(v) for k, v in (slo or {}).items() if isinstance(v, int | float)},
        running_while_waiting=_running_while_waiting(result.samples),
        run_t=run_t,
        run_n=run_n,
        pre_t=pre_t,
        pre_n=pre_n,
        max_tokens=_stated_max_tokens(result.config),
        no_think=not result.config.get("sessions") and not result.config.get("trace"),
        kv_exported=max(
            (s.value for s in result.samples if s.name == "engine.kv_capacity_tokens" and s.value),
            default=None,
        ),
        kv_block=max(
            (s.value for s in result.samples if s.name == "engine.kv_block_tokens" and s.value),
            default=1.0,
        ),
    )


def merge_runs(runs: Sequence[tuple[str, RunResult, float | None]]) -> RunData:
    """Several runs of one server at different slot limits (tune's trials) as one:
    each run's levels are named ``TAG/level`` and keep the slot limit stated for their
    run, so one model is fitted to all of them. The runs must not overlap in time."""
    parts = [(tag, run_data(r), s) for tag, r, s in runs]
    if not parts:
        raise ValueError("no runs to merge")
    offset = 0
    levels: list[LevelData] = []
    for tag, d, s in parts:
        for lv in d.levels:
            levels.append(
                replace(
                    lv,
                    name=f"{tag}/{lv.name}",
                    idx=lv.idx + offset,
                    slots=s if s else d.stated_slots,
                )
            )
        offset += d.scheduled.size

    def cat(name: str) -> np.ndarray:
        return np.concatenate([getattr(d, name) for _, d, _ in parts])

    label = np.concatenate(
        [np.asarray([f"{tag}/{x}" for x in d.level], dtype=object) for tag, d, _ in parts]
    )
    first = parts[0]
    return RunData(
        level=label,
        scheduled=cat("scheduled"),
        sent=cat("sent"),
        first=cat("first"),
        last=cat("last"),
        end=cat("end"),
        prompt=cat("prompt"),
        output=cat("output"),
        ok=cat("ok"),
        levels=levels,
        stated_slots=first[2] or first[1].stated_slots,
        stated_source="stated per run",
        kv_t=cat("kv_t"),
        kv_u=cat("kv_u"),
        slo=first[1].slo,
    )
