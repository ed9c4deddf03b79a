"""Per-window signals: R, Q, S, kv, P, U, SM, CPU from samples; in-flight counts,
errors and latencies from request records (docs/design.md section 5 symbols)."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from infersight.core.fleet import SeriesArrays
from infersight.core.records import RequestRecord, Sample
from infersight.diagnose.inflight import InFlight, steps

__all__ = ["RecordArrays", "SampleIndex", "WindowStats", "inflight_stats", "window_stats"]


class SampleIndex:
    """Samples grouped by name and label set, as sorted numpy series."""

    def __init__(self, samples: list[Sample]) -> None:
        groups: dict[tuple[str, tuple[tuple[str, str], ...]], list[tuple[float, float]]] = (
            defaultdict(list)
        )
        for s in samples:
            if s.value is None:
                continue
            try:
                v = float(s.value)
            except (TypeError, ValueError):
                continue
            if not np.isfinite(v):
                continue
            groups[(s.name, tuple(sorted(s.labels.items())))].append((s.t, v))
        self._series: dict[str, list[tuple[dict[str, str], np.ndarray, np.ndarray]]] = defaultdict(
            list
        )
        for (name, labels), pts in groups.items():
            pts.sort()
            arr = np.asarray(pts, dtype=float)
            self._series[name].append((dict(labels), arr[:, 0], arr[:, 1]))

    @classmethod
    def from_series(cls, series: Iterable[SeriesArrays]) -> SampleIndex:
        """An index over series already held as arrays (a metrics store's range query),
        without one Sample object per point; non-finite values are dropped."""
        idx = cls([])
        for s in series:
            t, v = np.asarray(s.t, dtype=float), np.asarray(s.v, dtype=float)
            keep = np.isfinite(v) & np.isfinite(t)
            if keep.any():
                order = np.argsort(t[keep], kind="stable")
                idx._series[s.name].append((dict(s.labels), t[keep][order], v[keep][order]))
        return idx

    def stat_values(self, metric: str, stat: str, t0: float, t1: float) -> list[np.ndarray]:
        """Values of the ``stat`` (p50, p99...) series of histogram ``metric`` in ``[t0, t1]``."""
        out = []
        for lab, t, v in self._series.get(metric, []):
            if lab.get("stat") != stat:
                continue
            i, j = np.searchsorted(t, t0, "left"), np.searchsorted(t, t1, "right")
            if j > i:
                out.append(v[i:j])
        return out

    def has(self, name: str) -> bool:
        return name in self._series

    def labels(self, name: str) -> list[dict[str, str]]:
        return [lab for lab, _, _ in self._series.get(name, [])]

    def span(self) -> tuple[float, float] | None:
        ts = [t for ss in self._series.values() for _, t, _ in ss if len(t)]
        if not ts:
            return None
        return min(float(t[0]) for t in ts), max(float(t[-1]) for t in ts)

    def values(self, metric: str, t0: float, t1: float, **match: str) -> list[np.ndarray]:
        """Values of each matching series inside ``[t0, t1]`` (one array per series)."""
        out = []
        for lab, t, v in self._series.get(metric, []):
            if any(lab.get(k) != val for k, val in match.items()):
                continue
            if "stat" in lab:  # histogram summaries are not gauges
                continue
            i, j = np.searchsorted(t, t0, "left"), np.searchsorted(t, t1, "right")
            if j > i:
                out.append(v[i:j])
        return out

    def times(self, metric: str, t0: float, t1: float) -> np.ndarray:
        """Every sample time of ``metric`` inside ``[t0, t1]`` (all series, sorted)."""
        ts = [
            t[(t >= t0) & (t <= t1)]
            for lab, t, _ in self._series.get(metric, [])
            if "stat" not in lab
        ]
        return np.unique(np.concatenate(ts)) if ts else np.zeros(0)

    def held(self, metric: str, times: np.ndarray, agg: str = "sum") -> np.ndarray | None:
        """Each series' last value at or before each of ``times`` (a gauge holds its
        value between scrapes), combined across series by ``agg`` ("sum" or "max");
        NaN where no series has a value yet. None when the metric was never sampled."""
        cols = []
        for lab, t, v in self._series.get(metric, []):
            if "stat" in lab:
                continue
            i = np.searchsorted(t, times, "right") - 1
            cols.append(np.where(i >= 0, v[np.clip(i, 0, None)], np.nan))
        if not cols:
            return None
        m = np.vstack(cols)
        seen = np.isfinite(m).any(axis=0)
        filled = np.where(np.isfinite(m), m, 0.0 if agg == "sum" else -np.inf)
        out = filled.sum(axis=0) if agg == "sum" else filled.max(axis=0)
        return np.where(seen, out, np.nan)

    def mean_sum(self, metric: str, t0: float, t1: float, **m: str) -> float | None:
        """Sum over series (e.g. replicas) of each series' mean in the window."""
        vals = self.values(metric, t0, t1, **m)
        return float(sum(a.mean() for a in vals)) if vals else None

    def mean_avg(self, metric: str, t0: float, t1: float, **m: str) -> float | None:
        """Average over series (e.g. GPUs) of each series' mean in the window."""
        vals = self.values(metric, t0, t1, **m)
        return float(np.mean([a.mean() for a in vals])) if vals else None

    def max_sum(self, metric: str, t0: float, t1: float, **m: str) -> float | None:
        vals = self.values(metric, t0, t1, **m)
        return float(sum(a.max() for a in vals)) if vals else None

    def frac_positive(self, name: str, t0: float, t1: float) -> float | None:
        vals = self.values(name, t0, t1)
        if not vals:
            return None
        n = min(len(a) for a in vals)
        total = np.sum([a[:n] for a in vals], axis=0)
        return float(np.mean(total > 0.5))

    def max_quantile(self, name: str, q: float, t0: float, t1: float) -> float | None:
        vals = self.values(name, t0, t1)
        return float(max(np.quantile(a, q) for a in vals)) if vals else None

    def counter_rate(self, name: str, t0: float, t1: float) -> float | None:
        """Per-second increase of a counter in the window, summed over series."""
        total = 0.0
        found = False
        for lab, t, v in self._series.get(name, []):
            if "stat" in lab:
                continue
            i, j = np.searchsorted(t, t0, "left"), np.searchsorted(t, t1, "right")
            if j - i >= 2 and t[j - 1] > t[i]:
                d = np.diff(v[i:j])
                total += float(np.sum(np.clip(d, 0, None))) / float(t[j - 1] - t[i])  # resets
                found = True
        return total if found else None


@dataclass(slots=True)
class RecordArrays:
    """Columns of the request records, for fast windowing of 100k+ requests."""

    scheduled: np.ndarray
    sent: np.ndarray
    end: np.ndarray
    first: np.ndarray
    ok: np.ndarray
    failed: np.ndarray
    prompt: np.ndarray
    output: np.ndarray
    tpot: np.ndarray
    queue_delay: np.ndarray
    lag: np.ndarray
    records: list[RequestRecord]
    #: The requests' send and end times, for counting them at each engine scrape.
    inflight: InFlight

    @classmethod
    def build(cls, records: list[RequestRecord]) -> RecordArrays:
        nan = float("nan")
        n = len(records)
        sched, sent, end, first, prompt, output, tpot, qd, lag = ([nan] * n for _ in range(9))
        ok = [False] * n
        failed = [False] * n
        # One pass in plain Python over lists (attribute reads only), then numpy.
        for i, r in enumerate(records):
            sched[i] = r.scheduled
            if r.sent is not None:
                sent[i] = r.sent
                lag[i] = r.sent - r.scheduled
            if r.end is not None:
                end[i] = r.end
            ct = r.chunk_times
            if ct:
                first[i] = ct[0]
            if r.prompt_tokens is not None:
                prompt[i] = r.prompt_tokens
            if r.ok:
                ok[i] = True
                out = (
                    r.completion_tokens if r.completion_tokens is not None else sum(r.chunk_tokens)
                )
                output[i] = out
                if out >= 2 and len(ct) >= 2:
                    tpot[i] = (ct[-1] - ct[0]) / (out - 1)
            elif r.error and not r.cancelled:
                failed[i] = True
            if r.queue_delay is not None:
                qd[i] = r.queue_delay
        cols = np.array([sched, sent, end, first, prompt, output, tpot, qd, lag], dtype=float)
        cols = cols.reshape(9, n)
        ok_a = np.array(ok, dtype=bool)
        return cls(
            scheduled=cols[0],
            sent=cols[1],
            end=cols[2],
            first=cols[3],
            prompt=cols[4],
            output=cols[5],
            tpot=cols[6],
            queue_delay=cols[7],
            lag=cols[8],
            ok=ok_a,
            failed=np.array(failed, dtype=bool),
            records=records,
            inflight=InFlight.build(cols[1], cols[2], cols[3], ok_a),
        )


def _nanmed(a: np.ndarray) -> float | None:
    a = a[np.isfinite(a)]
    return float(np.median(a)) if a.size else None


def _nanmean(a: np.ndarray) -> float | None:
    a = a[np.isfinite(a)]
    return float(np.mean(a)) if a.size else None


@dataclass(slots=True)
class WindowStats:
    """Everything the rules look at, for one window."""

    t0: float
    t1: float
    n: int = 0
    n_ok: int = 0
    n_failed: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    error_sources: Counter[str] = field(default_factory=Counter)
    error_example: dict[str, str] = field(default_factory=dict)
    inflight_mean: float = 0.0
    inflight_max: int = 0
    ttft_sent_p50: float | None = None
    e2e_sent_p50: float | None = None
    itl_p50: float | None = None
    itl_source: str = ""
    prompt_mean: float | None = None
    output_mean: float | None = None
    queue_delay_mean: float | None = None
    lag_p99: float | None = None
    output_tps: float = 0.0
    prompt_tps: float = 0.0
    #: The run's requests (all of them, not only this window's: the engine sees every
    #: one), to count at each scrape; None for a window read from a metrics store.
    inflight_probe: InFlight | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def seconds(self) -> float:
        return max(1e-9, self.t1 - self.t0)


def inflight_stats(sent: np.ndarray, end: np.ndarray, t0: float, t1: float) -> tuple[float, int]:
    """Time-weighted mean and max of requests in flight (sent <= t < end) in [t0, t1]."""
    m = np.isfinite(sent)
    counts, held = steps(sent[m], np.where(np.isfinite(end[m]), end[m], np.inf), t0, t1)
    return float(np.sum(counts * held)) / max(1e-9, t1 - t0), int(counts.max())


def window_stats(ra: RecordArrays, t0: float, t1: float, idx: np.ndarray) -> WindowStats:
    """Record-side statistics for the records ``idx`` (those scheduled in the window)."""
    w = WindowStats(t0=t0, t1=t1, n=int(idx.size), inflight_probe=ra.inflight)
    if not idx.size:
        return w
    w.n_ok = int(ra.ok[idx].sum())
    failed = idx[ra.failed[idx]]
    w.n_failed = int(failed.size)
    for i in failed[:100_000]:
        r = ra.records[int(i)]
        kind = r.error or "unknown"
        w.errors[kind] += 1
        src = r.labels.get("upstream") or (f"HTTP {r.status}" if r.status else "no HTTP response")
        w.error_sources[src] += 1
        if kind not in w.error_example and r.error_message:
            w.error_example[kind] = r.error_message[:160]
    w.inflight_mean, w.inflight_max = inflight_stats(ra.sent[idx], ra.end[idx], t0, t1)
    ok = idx[ra.ok[idx]]
    first, sent, end = ra.first[ok], ra.sent[ok], ra.end[ok]
    w.ttft_sent_p50 = _nanmed(first - sent)
    w.e2e_sent_p50 = _nanmed(end - sent)
    w.itl_p50 = _nanmed(ra.tpot[ok])
    w.itl_source = "median per-request TPOT of the window's records"
    w.prompt_mean = _nanmean(ra.prompt[ok])
    w.output_mean = _nanmean(ra.output[ok])
    w.queue_delay_mean = _nanmean(ra.queue_delay[idx])
    lag = ra.lag[idx]
    lag = lag[np.isfinite(lag)]
    w.lag_p99 = float(np.quantile(lag, 0.99)) if lag.size else None
    done = ok[(ra.end[ok] >= t0) & (ra.end[ok] <= t1)]
    w.output_tps = float(np.nansum(ra.output[done])) / w.seconds
    w.prompt_tps = float(np.nansum(ra.prompt[done])) / w.seconds
    return w
