"""Prometheus exporter: a ``prometheus_client`` Collector over the recorder's latest
round, served with ``/metrics`` and ``/health`` on 127.0.0.1 by default.

Names, types and help come from one table (:mod:`.names`, documented in
``docs/metrics.md``); nothing outside it is exported (``raw.*`` engine metrics stay
on the engine: scrape it directly for those). Engine latencies stay histograms with
the engine's own buckets, cumulative since the engine started, so ``rate()`` and
``histogram_quantile()`` work across instances. Values that are not available are
left out (absence is how Prometheus says "no data"). A scrape never reaches upstream:
it renders the samples cached by the background recorder, so it takes about a
millisecond.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from infersight.core.records import Sample
from infersight.telemetry.exporter.names import (
    EXPORTER_OWN,
    GPU_INFO,
    INTEGRATED,
    Exported,
    exported_for,
    exported_name,
)

__all__ = ["TelemetryCollector", "exported_name", "render"]

_LabelKey = tuple[tuple[str, str], ...]


def _key(labels: dict[str, str]) -> _LabelKey:
    return tuple(sorted(labels.items()))


def _family(e: Exported) -> Metric:
    base = e.name[: -len("_total")] if e.kind == "counter" else e.name
    return Metric(base, e.help, e.kind)


class _Histogram:
    """One histogram series being assembled from ``stat=bucket|sum|count`` samples."""

    __slots__ = ("buckets", "count", "labels", "sum")

    def __init__(self, labels: dict[str, str]) -> None:
        self.labels = labels
        self.buckets: list[tuple[float, str, float]] = []
        self.sum: float | None = None
        self.count: float | None = None

    def add(self, stat: str, le: str | None, value: float) -> None:
        if stat == "sum":
            self.sum = value
        elif stat == "count":
            self.count = value
        elif stat == "bucket" and le is not None:
            self.buckets.append((float(le), le, value))

    def emit(self, fam: Metric) -> None:
        if self.count is None and not self.buckets:
            return
        buckets = sorted(self.buckets)
        if not buckets or buckets[-1][0] != float("inf"):
            # Without the engine's buckets (or the +Inf one) the count is the +Inf bucket:
            # a valid histogram whose sum and count are still exact.
            buckets.append((float("inf"), "+Inf", self.count or 0.0))
        for _, le, v in buckets:
            fam.add_sample(fam.name + "_bucket", {**self.labels, "le": le}, v)
        fam.add_sample(fam.name + "_count", dict(self.labels), self.count or buckets[-1][2])
        if self.sum is not None:
            fam.add_sample(fam.name + "_sum", dict(self.labels), self.sum)


def _families(
    samples: Iterable[Sample], integrals: dict[tuple[str, _LabelKey], tuple[float, float]]
) -> list[Metric]:
    fams: dict[str, Metric] = {}
    seen: set[tuple[str, _LabelKey]] = set()
    hists: dict[tuple[str, _LabelKey], _Histogram] = {}
    for s in samples:
        e = exported_for(s.name, s.labels) if s.value is not None else None
        if e is None:
            continue
        fam = fams.get(e.name)
        if fam is None:
            fam = fams[e.name] = _family(e)
        if e.kind == "histogram":
            labels = {k: v for k, v in s.labels.items() if k not in ("stat", "le")}
            hk = (e.name, _key(labels))
            h = hists.get(hk)
            if h is None:
                h = hists[hk] = _Histogram(labels)
            h.add(s.labels.get("stat", ""), s.labels.get("le"), float(s.value))  # type: ignore[arg-type]
            continue
        labels = {k: v for k, v in s.labels.items() if k not in e.drop}
        key = (e.name, _key(labels))
        if key in seen:  # one value per label set (the latest round has one)
            continue
        seen.add(key)
        value = float(s.value) * e.scale  # type: ignore[arg-type]
        if e.integrate:
            value = integrals.get((s.name, _key(s.labels)), (0.0, 0.0))[1] * e.scale
        sample_name = e.name if e.kind == "counter" else fam.name
        fam.add_sample(sample_name, labels, value)
    for (name, _), h in hists.items():
        h.emit(fams[name])
    return [f for f in fams.values() if f.samples]


class TelemetryCollector(Collector):
    """Yields the latest samples from ``source`` (any callable returning samples,
    e.g. ``Recorder.latest``) as Prometheus metric families, plus the exporter's own
    ``infersight_exporter_*`` health metrics and, given ``gpus`` (the static GPU
    descriptions of :class:`~infersight.telemetry.wiring.Telemetry`), ``infersight_gpu_info``.

    Rate samples exported as counters (PCIe bytes) are integrated at every round the
    collector sees: pass each round to :meth:`observe` (the exporter server does, from
    the recorder's listener); a scrape also observes the round it renders.
    """

    def __init__(
        self,
        source: Callable[[], Iterable[Sample]],
        *,
        rounds: Callable[[], int] | None = None,
        last_round: Callable[[], float | None] | None = None,
        gpus: Sequence[dict[str, Any]] = (),
    ) -> None:
        self.source = source
        self._rounds = rounds
        self._last_round = last_round
        self._gpus = list(gpus)
        # (sample name, labels) -> (time of the last reading added, integral so far)
        self._integrals: dict[tuple[str, _LabelKey], tuple[float, float]] = {}
        self._lock = threading.Lock()

    def observe(self, samples: Iterable[Sample]) -> None:
        """Add one round to the integrated counters (idempotent per sample time)."""
        with self._lock:
            for s in samples:
                if s.name not in INTEGRATED or s.value is None:
                    continue
                key = (s.name, _key(s.labels))
                prev = self._integrals.get(key)
                if prev is None:
                    self._integrals[key] = (s.t, 0.0)
                elif s.t > prev[0]:
                    # The rate read now stands for the interval since the last reading.
                    self._integrals[key] = (s.t, prev[1] + s.value * (s.t - prev[0]))

    def collect(self) -> Iterator[Metric]:
        samples = list(self.source())
        self.observe(samples)
        with self._lock:
            integrals = dict(self._integrals)
        yield from _families(samples, integrals)
        yield from self._own(samples)

    def _own(self, samples: list[Sample]) -> Iterator[Metric]:
        def gauge(name: str, value: float) -> Metric:
            m = Metric(name, EXPORTER_OWN[name][1], "gauge")
            m.add_sample(name, {}, value)
            return m

        yield gauge("infersight_exporter_up", 1.0)
        gpus = {s.labels.get("gpu") for s in samples if s.name.startswith("gpu.")}
        yield gauge("infersight_exporter_gpus", float(len(gpus - {None})))
        if self._rounds is not None:
            name = "infersight_exporter_rounds_total"
            c = Metric(name[: -len("_total")], EXPORTER_OWN[name][1], "counter")
            c.add_sample(name, {}, float(self._rounds()))
            yield c
        t = self._last_round() if self._last_round is not None else None
        if t is not None:
            yield gauge("infersight_exporter_sample_age_seconds", max(0.0, time.monotonic() - t))
        if self._gpus:
            info = Metric(GPU_INFO[0], GPU_INFO[1], "gauge")
            for g in self._gpus:
                labels = {"gpu": str(g.get("index", ""))}
                for k in ("name", "uuid", "driver_version"):
                    labels[k] = "" if g.get(k) is None else str(g[k])
                info.add_sample(GPU_INFO[0], labels, 1.0)
            yield info


def render(samples: Iterable[Sample]) -> bytes:
    """Prometheus text for a list of samples (fresh registry; for tests and tools)."""
    reg = CollectorRegistry(auto_describe=False)
    items = list(samples)
    reg.register(TelemetryCollector(lambda: items))
    data: bytes = generate_latest(reg)
    return data
