"""``diagnose_run(result)``: the run's capacity curve, then its windows, the symbols and
the rules, then its one recommendation (docs/design.md sections 2 and 5)."""

from __future__ import annotations

import itertools
import platform
from dataclasses import dataclass
from typing import Any

import numpy as np

from infersight.core.curve import CapacityCurve, Recommendation
from infersight.core.records import RunResult
from infersight.core.verdicts import VERDICT_IDS, Evidence, Verdict, VerdictWindow
from infersight.diagnose.calibrate import calibrate_cpu, physics_bounds, sequence_context
from infersight.diagnose.context import RunContext, resolve_context, stored_physics
from infersight.diagnose.curve_builder import build_curve, level_aggregates
from infersight.diagnose.model_advice import ModelAdvice, model_advice
from infersight.diagnose.model_numbers import FixNumbers, model_numbers
from infersight.diagnose.one_voice import Voice, speak
from infersight.diagnose.physics.hardware import Device
from infersight.diagnose.recommend import recommend, reconcile
from infersight.diagnose.rules.registry import RuleInput, evaluate
from infersight.diagnose.signals import RecordArrays, SampleIndex, WindowStats, window_stats
from infersight.diagnose.signals_engine import EngineSignals, engine_signals, floor_record
from infersight.stats.level_flags import CLIENT_CPU_LIMIT, LAG_P99_LIMIT, over_limit

__all__ = ["Diagnosis", "diagnose", "diagnose_run"]


@dataclass(slots=True)
class Diagnosis:
    """What diagnose finds in a run: each window's verdicts, the run's capacity curve
    and its one recommendation (stored in the RunResult by ``embed_diagnosis``)."""

    verdicts: list[Verdict]
    curve: CapacityCurve | None
    recommendation: Recommendation | None
    #: The fitted model of the server and its self-check (docs/design.md section 9).
    advice: ModelAdvice | None = None


MAX_WINDOWS = 5000


def _levels(result: RunResult, ra: RecordArrays) -> list[tuple[str | None, np.ndarray]]:
    names: list[str] = []
    for lv in result.config.get("levels") or []:
        if isinstance(lv, dict) and lv.get("name"):
            names.append(str(lv["name"]))
    labels = [r.labels.get("level") for r in ra.records]
    for lab in labels:
        if lab is not None and lab not in names:
            names.append(lab)
    if not names:
        return [(None, np.arange(len(ra.records)))]
    arr = np.array([lab or "" for lab in labels], dtype=object)
    out = [(n, np.flatnonzero(arr == n)) for n in names]
    return [(n, i) for n, i in out if i.size]


def _span(ra: RecordArrays, idx: np.ndarray) -> tuple[float, float]:
    t0 = float(np.min(ra.scheduled[idx]))
    ends = np.concatenate([ra.end[idx], ra.first[idx], ra.sent[idx], ra.scheduled[idx]])
    t1 = float(np.nanmax(ends))
    return t0, max(t1, t0 + 1e-6)


def _edges(t0: float, t1: float, step: float) -> np.ndarray:
    """Window boundaries covering [t0, t1] in slices of ``step`` (at least one)."""
    n = max(1, int(np.ceil((t1 - t0) / step - 1e-9)))
    if n > MAX_WINDOWS:  # a tiny --window over a long recording: widen it
        n, step = MAX_WINDOWS, (t1 - t0) / MAX_WINDOWS
    return np.asarray(t0 + step * np.arange(n + 1), dtype=float)


def _client_flag(
    result: RunResult,
    agg: dict[str, Any],
    level: str | None,
    lag_p99: float | None,
    loadgen: float | None,
) -> tuple[bool, list[str]]:
    cl = agg.get("client_limited") if isinstance(agg, dict) else None
    if isinstance(cl, dict) and "flag" in cl:
        return bool(cl["flag"]), [str(r) for r in cl.get("reasons") or []]
    if level is None and (result.client_limited or result.client_limited_reasons):
        return result.client_limited, list(result.client_limited_reasons)
    if result.kind == "monitor":
        return False, []  # probes or passive watching: there is no load generator to limit
    # A file without the bench's flag: its fixed limits (docs/design.md section 2).
    reasons = []
    if lag_p99 is not None and lag_p99 > LAG_P99_LIMIT:
        reasons.append(f"schedule lag p99 {over_limit(lag_p99, LAG_P99_LIMIT, ' ms', scale=1e3)}")
    if loadgen is not None and loadgen > CLIENT_CPU_LIMIT:
        cpu_text = over_limit(loadgen, CLIENT_CPU_LIMIT, "% of a core", nd=0)
        reasons.append(f"load generator CPU {cpu_text}")
    return bool(reasons), reasons


def _agg_stat(agg: dict[str, Any], key: str, stat: str) -> tuple[float | None, int]:
    summ = agg.get(key)
    if not isinstance(summ, dict) or not isinstance(summ.get(stat), int | float):
        return None, 0
    return float(summ[stat]), int(summ.get("count") or 0)


def use_aggregates(w: WindowStats, agg: dict[str, Any], level: str) -> None:
    """Quote the level's latencies as the aggregates tables do (same requests, same
    definitions: docs/design.md section 2), not as this window's own records would."""
    win = agg.get("window") if isinstance(agg.get("window"), dict) else {}
    method = f", window {win['method']}" if isinstance(win, dict) and win.get("method") else ""
    for key, stat, attr, what in (
        ("itl", "p50", "itl_p50", "pooled, token-weighted"),
        ("ttft_from_sent", "p50", "ttft_sent_p50", "from actual send"),
        ("e2e_from_sent", "p50", "e2e_sent_p50", "from actual send"),
        ("schedule_lag", "p99", "lag_p99", "sent - scheduled"),
    ):
        v, n = _agg_stat(agg, key, stat)
        if v is not None:
            setattr(w, attr, v)
            w.extra[f"{attr}_source"] = (
                f"bench aggregates[{level}].{key}.{stat} ({what}; {n} samples{method})"
            )
    if "itl_p50_source" in w.extra:
        w.itl_source = str(w.extra["itl_p50_source"])


@dataclass(frozen=True, slots=True)
class _Run:
    result: RunResult
    ra: RecordArrays
    sidx: SampleIndex
    ctx: RunContext
    curve: CapacityCurve | None
    fix: FixNumbers | None
    advice: ModelAdvice | None = None


def _evaluate_window(
    run: _Run, level: str | None, idx: np.ndarray, t0: float, t1: float, whole_level: bool
) -> tuple[list[Verdict], EngineSignals]:
    result = run.result
    w = window_stats(run.ra, t0, t1, idx)
    agg = result.aggregates.get(level, {}) if level is not None else {}
    if not isinstance(agg, dict):
        agg = {}
    if whole_level and level is not None:
        use_aggregates(w, agg, level)
    s = engine_signals(run.sidx, w, run.ctx, level if whole_level else None)
    flag, reasons = _client_flag(result, agg, level, w.lag_p99, s.loadgen_cpu)
    marginal = bool((agg.get("client_limited") or {}).get("marginal"))
    ri = RuleInput(
        w=w,
        s=s,
        ctx=run.ctx,
        level=level,
        client_limited=flag,
        client_reasons=reasons,
        agg=agg,
        curve=run.curve,
        sized_by_model=run.fix is not None,
        client_marginal=marginal,
    )
    return evaluate(ri), s


def _merge(verdicts: list[Verdict]) -> list[Verdict]:
    """Join consecutive windows with the same verdict into one (keeps the most confident)."""
    out: list[Verdict] = []
    open_: dict[tuple[str, str | None], Verdict] = {}
    for v in verdicts:
        key = (v.id, v.level)
        prev = open_.get(key)
        if prev is not None and abs(prev.window.end - v.window.start) < 1e-6:
            keep = v if v.confidence > prev.confidence else prev
            merged = keep.model_copy(
                update={"window": VerdictWindow(start=prev.window.start, end=v.window.end)}
            )
            out[out.index(prev)] = merged
            open_[key] = merged
        else:
            out.append(v)
            open_[key] = v
    return out


def diagnose(result: RunResult, **options: Any) -> list[Verdict]:
    """The verdicts of :func:`diagnose_run` (docs/design.md section 5), per time window;
    ``options`` are its keyword arguments."""
    return diagnose_run(result, **options).verdicts


def _prepare(
    result: RunResult,
    ra: RecordArrays,
    sidx: SampleIndex,
    ctx: RunContext,
    engine_slots: int | None,
) -> _Run:
    """The capacity curve (what was measured), the CPU's calibrated ceiling, and the
    fitted model with the numbers of the fixes (docs/design.md section 9)."""
    levels = _levels(result, ra) if ra.records else []
    if not levels or levels[0][0] is None:
        return _Run(result, ra, sidx, ctx, None, None)
    aggs = level_aggregates(result, levels)
    curve = build_curve(levels, aggs, ra, sidx)
    calibrate_cpu(ctx, curve, aggs)
    adv = model_advice(result, engine_slots)
    m = adv.model
    if m is not None and m.slots.source == "fitted" and m.slots.value:
        ctx.curve_slots = float(m.slots.value)
        ctx.curve_slots_source = (
            "the fitted model: the smallest slot count under which no request got its first "
            "token before a slot was free (FIFO replay of the client's records)"
        )
    bounds = physics_bounds(ctx, sequence_context(ctx, aggs))
    closed = any(p.concurrency for p in curve.points) if curve is not None else False
    fix = (
        model_numbers(
            m,
            adv.check,
            adv.fix,
            closed_loop=closed,
            physics=bounds,
        )
        if m is not None and adv.check is not None
        else None
    )
    return _Run(result, ra, sidx, ctx, curve, fix, adv)


def diagnose_run(
    result: RunResult,
    *,
    window_seconds: float | None = None,
    model: Any = None,
    gpu: str | Device | None = None,
    engine_slots: int | None = None,
    store_physics: bool = False,
) -> Diagnosis:
    """Diagnose a run: its capacity curve, the verdicts of docs/design.md section 5 per
    time window, and the run's one recommendation.

    Windows are the bench's load levels (``records[i].labels["level"]``) by default, or
    consecutive slices of ``window_seconds``. ``model`` (config.json / GGUF path,
    ``"embedded"``, a dict) and ``gpu`` (a peak-table name) enable the roofline floors
    when the RunResult does not name them itself. ``engine_slots`` states the engine's
    slot limit (else: the run's ``--engine-slots``, the engine's export, R's plateau or
    the curve's). With ``store_physics`` the device peaks and per-level floors used are
    written to ``result.environment["physics"]``, so later readers of the file reuse
    them instead of measuring their own machine. A window where nothing is wrong gets
    one ``healthy`` verdict.
    """
    ra = RecordArrays.build(result.records)
    sidx = SampleIndex(result.samples)
    ctx = resolve_context(result, sidx, model=model, gpu=gpu, engine_slots=engine_slots)
    run = _prepare(result, ra, sidx, ctx, engine_slots)
    windows = _windows(result, ra, sidx, window_seconds)
    order = {vid: i for i, vid in enumerate(VERDICT_IDS)}
    verdicts: list[Verdict] = []
    floors: dict[str, dict[str, Any]] = {}
    for level, ids, a, b in windows:
        vs, sig = _evaluate_window(run, level, ids, a, b, whole_level=not window_seconds)
        verdicts.extend(sorted(vs, key=lambda v: order.get(v.id, 99)))
        if level is not None and not window_seconds and sig.itl_floor is not None:
            floors[level] = floor_record(sig)
    if window_seconds:
        verdicts = _merge(verdicts)
    rec = recommend(verdicts, run.curve, run.fix, ctx.engine)
    advice = run.advice
    if advice is not None and advice.model is not None:
        # the preemptions of the most loaded level, where the fix is sized
        span = (windows[-1][2], windows[-1][3]) if windows else sidx.span()
        pre = sidx.counter_rate("engine.preemptions_total", *span) if span else None
        curve, engine, fix = run.curve, ctx.engine, run.fix
        top = curve.points[-1].level if curve is not None and curve.points else None
        vo = Voice(
            advice, fix, engine, pre, top, lambda vs: recommend(vs, curve, fix, engine), curve
        )
        rec, verdicts = speak(verdicts, rec, vo)
    reconcile(verdicts, rec)
    for v in verdicts:
        v.evidence.extend(
            Evidence(key="note", name="note", value=n, source="diagnose") for n in ctx.notes
        )
    if store_physics:
        _store(result, ctx, floors)
    return Diagnosis(verdicts, run.curve, rec, advice)


def _windows(
    result: RunResult, ra: RecordArrays, sidx: SampleIndex, window_seconds: float | None
) -> list[tuple[str | None, np.ndarray, float, float]]:
    windows: list[tuple[str | None, np.ndarray, float, float]] = []
    if ra.records:
        if window_seconds:
            t0, t1 = _span(ra, np.arange(len(ra.records)))
            level_of = np.array([r.labels.get("level") or "" for r in ra.records], dtype=object)
            ends = np.where(np.isfinite(ra.end), ra.end, t1)
            edges = _edges(t0, t1, window_seconds)
            for a, b in itertools.pairwise(edges):
                # every request alive in the slice counts towards it
                ids = np.flatnonzero((ra.scheduled < b) & (ends >= a))
                names, counts = np.unique(level_of[ids], return_counts=True)
                top = str(names[np.argmax(counts)]) if ids.size else ""
                windows.append((top or None, ids, float(a), float(b)))
        else:
            for name, ids in _levels(result, ra):
                a, b = _span(ra, ids)
                windows.append((name, ids, a, b))
        return windows
    span = sidx.span()
    if span is None:
        return []
    t0, t1 = span
    step = window_seconds or max(1e-6, t1 - t0)
    empty = np.zeros(0, dtype=int)
    return [(None, empty, float(a), float(b)) for a, b in itertools.pairwise(_edges(t0, t1, step))]


def _store(result: RunResult, ctx: RunContext, floors: dict[str, dict[str, Any]]) -> None:
    """Keep the peaks and floors this diagnosis used (docs/design.md section 1: the file
    alone gives the same numbers on any machine)."""
    if ctx.device is None:
        return
    doc: dict[str, Any] = {
        "device": ctx.device.to_dict(),
        "device_origin": ctx.device_origin,
        "model": ctx.shape.name if ctx.shape is not None else None,
        "floors": floors,
    }
    if ctx.device.measured and ctx.device_origin in ("measured", "calibrated"):
        doc["measured_on"] = platform.node()
    elif ctx.device_origin == "stored":
        doc["measured_on"] = stored_physics(result).get("measured_on")
    result.environment = {**result.environment, "physics": doc}
