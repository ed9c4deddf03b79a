"""Engine detection and the normaliser that turns one engine's /metrics into
normalised samples, by the engine table of :mod:`infersight.core.engines`.

Normalised names (``engine.*``, listed in ``infersight.telemetry``) carry labels ``engine``
and ``source``.
Histograms become ``<name>`` with ``stat=sum|count`` (cumulative since the engine
started) and ``stat=p50|p90|p99`` (over the interval since the previous scrape of the
same normaliser; absent in the first round and None when nothing was observed); with
``buckets=True`` (the exporter) also ``stat=bucket`` with ``le``: the engine's own
cumulative buckets, merged over its label sets.
"""

from __future__ import annotations

import math

from infersight.core.engines import EngineSpec, MetricRule, engine_specs
from infersight.core.records import Sample
from infersight.telemetry.promtext import (
    Histogram,
    Series,
    bucket_delta,
    histogram_quantile,
    merge_buckets,
    parse_metrics,
)

__all__ = [
    "QUANTILES",
    "Normalizer",
    "detect_engine",
    "engine_specs",
]

#: Quantiles emitted for every mapped histogram, as (label, q).
QUANTILES: tuple[tuple[str, float], ...] = (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))


#: The infersight gateway's entry in the engine table: in front of the embedded engine
#: (``infersight serve``) it exports the engine's metrics too, and then the engine is
#: the one detected.
_GATEWAY = "infersight"


def detect_engine(names: list[str] | set[str]) -> str | None:
    """The engine whose prefixes match the most metric names (a real engine before
    the infersight gateway that fronts it), or None."""
    counts = {
        key: sum(1 for name in names if name.startswith(spec.detect))
        for key, spec in engine_specs().items()
    }
    engines = {key: n for key, n in counts.items() if n and key != _GATEWAY}
    if engines:
        return max(engines, key=lambda key: engines[key])
    return _GATEWAY if counts.get(_GATEWAY) else None


def _le(bound: float) -> str:
    """A bucket bound as Prometheus writes it ("+Inf"; floats in their shortest form)."""
    return "+Inf" if math.isinf(bound) else repr(bound)


def _combine(values: list[float], agg: str) -> float:
    if agg == "max":
        return max(values)
    if agg == "mean":
        return sum(values) / len(values)
    return sum(values)


def _candidates(s: Series) -> tuple[str, ...]:
    # prometheus_client's parser appends _total to counter samples and strips it from
    # family names; try every spelling an engine's docs might use.
    n = s.name
    alt = n[: -len("_total")] if n.endswith("_total") else n + "_total"
    return (n, s.family, alt)


class Normalizer:
    """Stateful: remembers the previous histogram buckets to compute interval quantiles."""

    def __init__(
        self, engine: str | None = None, source: str = "", *, buckets: bool = False
    ) -> None:
        self.engine = engine
        self.source = source
        self.buckets = buckets
        self._prev_buckets: dict[str, list[tuple[float, float]]] = {}

    @property
    def spec(self) -> EngineSpec | None:
        return engine_specs().get(self.engine) if self.engine else None

    def normalize_text(self, text: str, t: float) -> list[Sample]:
        """Parse a /metrics body and normalise it (raises MalformedStream)."""
        series, hists = parse_metrics(text)
        return self.normalize(series, hists, t)

    def normalize(self, series: list[Series], hists: list[Histogram], t: float) -> list[Sample]:
        if self.engine is None:
            names = {s.name for s in series} | {h.family for h in hists}
            self.engine = detect_engine(names)
        spec = self.spec
        base = {"engine": self.engine or "unknown", "source": self.source}
        out: list[Sample] = []
        plain: dict[str, tuple[MetricRule, list[float]]] = {}
        grouped: dict[str, tuple[MetricRule, list[Histogram]]] = {}

        for s in series:
            rules = spec.rules_for(s.labels, *_candidates(s)) if spec else None
            if not rules:
                out.append(Sample(t, f"raw.{s.name}", s.value, {**s.labels, **base}))
            for rule in rules or ():
                value = _label_value(s.labels, rule.value_label) if rule.value_label else s.value
                if value is not None:
                    plain.setdefault(rule.name, (rule, []))[1].append(value * rule.scale)
        for h in hists:
            rules = spec.rules_for(h.labels, h.family) if spec else None
            if not rules:
                labels = {**h.labels, **base}
                out.append(Sample(t, f"raw.{h.family}_sum", h.sum, labels))
                out.append(Sample(t, f"raw.{h.family}_count", h.count, dict(labels)))
            for rule in rules or ():
                if rule.part is not None:
                    v = h.sum if rule.part == "sum" else h.count
                    if v is not None:
                        plain.setdefault(rule.name, (rule, []))[1].append(v * rule.scale)
                else:
                    grouped.setdefault(rule.name, (rule, []))[1].append(h)

        for name, (rule, values) in plain.items():
            out.append(Sample(t, name, _combine(values, rule.agg), dict(base)))
        for name, (_, hs) in grouped.items():
            out.extend(self._histogram_samples(name, hs, base, t))
        return out

    def _histogram_samples(
        self, name: str, hs: list[Histogram], base: dict[str, str], t: float
    ) -> list[Sample]:
        total_sum = sum(h.sum for h in hs if h.sum is not None)
        total_count = sum(h.count for h in hs if h.count is not None)
        out = [
            Sample(t, name, total_sum, {**base, "stat": "sum"}),
            Sample(t, name, total_count, {**base, "stat": "count"}),
        ]
        buckets = merge_buckets(hs)
        if self.buckets:
            out.extend(
                Sample(t, name, c, {**base, "stat": "bucket", "le": _le(le)}) for le, c in buckets
            )
        prev = self._prev_buckets.get(name)
        self._prev_buckets[name] = buckets
        if prev is None:
            return out  # no interval yet
        delta = bucket_delta(buckets, prev)
        if delta is None:  # engine restarted or layout changed: the totals are the interval
            delta = buckets
        for label, q in QUANTILES:
            out.append(Sample(t, name, histogram_quantile(q, delta), {**base, "stat": label}))
        return out


def _label_value(labels: dict[str, str], key: str | None) -> float | None:
    """A number an info metric carries in a label (None when absent or not a number)."""
    try:
        return float(labels[key]) if key is not None else None
    except (KeyError, ValueError):
        return None
