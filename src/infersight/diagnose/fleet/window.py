"""One replica's window from a metrics store: the same WindowStats and EngineSignals the
rules read for a run, filled from the engine's counters and latency histograms
instead of request records.

Request counts come from the engine's finished-requests counter, throughput from its
token counters, and the latencies from its histograms (quantiles Prometheus computed):
the engine measures from a request's arrival, which is the client's actual send time
less the network, so they stand in for the "from actual send" figures of a run.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from infersight.core.verdicts import VERDICT_IDS, Verdict, VerdictWindow
from infersight.diagnose.context import RunContext
from infersight.diagnose.rules.registry import RuleInput, evaluate
from infersight.diagnose.signals import SampleIndex, WindowStats
from infersight.diagnose.signals_engine import EngineSignals, engine_signals

__all__ = [
    "Pending",
    "WindowRow",
    "judge",
    "window_signals",
]

_HIST_SOURCE = (
    "engine histogram {name} {stat} (histogram_quantile in Prometheus; from arrival at the engine)"
)
_PRESENCE = ("engine.requests_running", "engine.requests_waiting", "gpu.utilization")
#: The rules name NVML's fields; dcgm-exporter's series say the same under these names.
_DCGM_SOURCES = {
    "NVML gpu.utilization": "DCGM_FI_DEV_GPU_UTIL (dcgm-exporter)",
    "NVML GPM gpu.sm_activity": "DCGM_FI_PROF_SM_ACTIVE (dcgm-exporter)",
    "NVML gpu.sm_activity": "DCGM_FI_PROF_SM_ACTIVE (dcgm-exporter)",
}
_ORDER = {vid: i for i, vid in enumerate(VERDICT_IDS)}


def _stat(idx: SampleIndex, name: str, stat: str, t0: float, t1: float, how: str) -> float | None:
    vals = idx.stat_values(name, stat, t0, t1)
    a = np.concatenate(vals) if vals else np.zeros(0)
    a = a[np.isfinite(a)]
    if not a.size:
        return None
    return float(np.median(a) if how == "median" else a.max())


def store_window_stats(idx: SampleIndex, t0: float, t1: float) -> WindowStats:
    """Record-side statistics of ``[t0, t1]`` from the engine's own counters and histograms."""
    w = WindowStats(t0=t0, t1=t1)
    done = idx.counter_rate("engine.requests_finished_total", t0, t1)
    if done is None:
        done = idx.counter_rate("engine.requests_total", t0, t1)
    out_tps = idx.counter_rate("engine.generation_tokens_total", t0, t1)
    in_tps = idx.counter_rate("engine.prompt_tokens_total", t0, t1)
    w.output_tps, w.prompt_tps = out_tps or 0.0, in_tps or 0.0
    if done:
        w.n = w.n_ok = round(done * w.seconds)
        w.output_mean = out_tps / done if out_tps is not None else None
        w.prompt_mean = in_tps / done if in_tps is not None else None
    for attr, name in (
        ("ttft_sent_p50", "engine.ttft_seconds"),
        ("e2e_sent_p50", "engine.e2e_seconds"),
        ("itl_p50", "engine.itl_seconds"),
    ):
        v = _stat(idx, name, "p50", t0, t1, "median")
        if v is not None:
            setattr(w, attr, v)
            w.extra[f"{attr}_source"] = _HIST_SOURCE.format(name=name, stat="p50")
    if w.itl_p50 is not None:
        w.itl_source = str(w.extra["itl_p50_source"])
    w.extra["ttft_p99"] = _stat(idx, "engine.ttft_seconds", "p99", t0, t1, "max")
    return w


@dataclass(frozen=True, slots=True)
class WindowRow:
    """What the fleet summary keeps of one replica's window (a few numbers, so a day of
    windows over a fleet stays small)."""

    start: float
    end: float
    R: float | None
    Q: float | None
    S: float | None
    kv: float | None
    U: float | None
    SM: float | None
    busy: float | None
    busy_source: str
    ids: tuple[str, ...]
    titles: tuple[str, ...]
    ttft_p99: float | None

    @property
    def seconds(self) -> float:
        return self.end - self.start


def window_end(start: float, end: float, step: float) -> float:
    """The last instant a window reads: the point at ``end`` is the next window's."""
    return end - min(step / 2, (end - start) / 2)


def has_data(idx: SampleIndex, start: float, t1: float) -> bool:
    return any(idx.times(n, start, t1).size for n in _PRESENCE)


@dataclass(slots=True)
class Pending:
    """A window's signals, before its verdicts."""

    start: float
    end: float
    w: WindowStats
    s: EngineSignals
    ctx: RunContext
    #: The GPU series came from dcgm-exporter (sources are named after its fields).
    dcgm: bool = False


def window_signals(
    idx: SampleIndex, ctx: RunContext, start: float, end: float, step: float
) -> Pending | None:
    """The symbols of ``[start, end)``, or None when the replica has no series there."""
    t1 = window_end(start, end, step)
    if not has_data(idx, start, t1):
        return None
    w = store_window_stats(idx, start, t1)
    dcgm = any(lab.get("via") == "dcgm" for lab in idx.labels("gpu.utilization"))
    return Pending(start, end, w, engine_signals(idx, w, ctx), ctx, dcgm)


def judge(p: Pending) -> tuple[list[Verdict], WindowRow]:
    """The rules on one window: its verdicts (most actionable first) and its row."""
    s, w = p.s, p.w
    vs = evaluate(RuleInput(w=w, s=s, ctx=p.ctx, client_limited=False))
    window = VerdictWindow(start=p.start, end=p.end)
    if p.dcgm:
        s.busy_source = _DCGM_SOURCES.get(s.busy_source, s.busy_source)
        for v in vs:
            for e in v.evidence:
                e.source = _DCGM_SOURCES.get(e.source, e.source)
    verdicts = sorted(
        (v.model_copy(update={"window": window}) for v in vs), key=lambda v: _ORDER.get(v.id, 99)
    )
    p99 = w.extra.get("ttft_p99")
    row = WindowRow(
        start=p.start,
        end=p.end,
        R=s.R,
        Q=s.Q,
        S=s.S,
        kv=s.kv,
        U=s.U,
        SM=s.SM,
        busy=s.busy,
        busy_source=s.busy_source,
        ids=tuple(v.id for v in verdicts),
        titles=tuple(v.title for v in verdicts),
        ttft_p99=float(p99) if isinstance(p99, int | float) else None,
    )
    return verdicts, row
