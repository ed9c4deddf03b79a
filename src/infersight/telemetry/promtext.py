"""Prometheus text parsing and histogram arithmetic.

Parsing uses ``prometheus_client.parser`` (the maintained reference parser); this
module flattens its families into series and computes quantiles from cumulative
bucket counts the way PromQL's ``histogram_quantile`` does.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from infersight.core.errors import MalformedStream

__all__ = [
    "Histogram",
    "Series",
    "histogram_quantile",
    "parse_metrics",
]


@dataclass(slots=True)
class Series:
    """One counter, gauge or untyped sample line."""

    name: str
    family: str
    type: str
    labels: dict[str, str]
    value: float


@dataclass(slots=True)
class Histogram:
    """One histogram series: cumulative bucket counts plus sum and count."""

    family: str
    labels: dict[str, str]
    #: (upper bound, cumulative count), sorted by bound, ending with +Inf when given.
    buckets: list[tuple[float, float]] = field(default_factory=list)
    sum: float | None = None
    count: float | None = None


def _label_key(labels: dict[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(labels.items()))


def parse_metrics(text: str) -> tuple[list[Series], list[Histogram]]:
    """Parse a Prometheus text exposition into plain series and histograms.

    Raises :class:`MalformedStream` when the text is not valid exposition format.
    """
    # The parser appends "_total" to counter samples that lack it; keep the name the
    # engine actually exposed so raw.<name> matches its documentation.
    exposed = {
        line.split("{", 1)[0].split(None, 1)[0]
        for line in text.splitlines()
        if line and not line.startswith("#") and line.strip()
    }
    series: list[Series] = []
    hists: dict[tuple[str, tuple[tuple[str, str], ...]], Histogram] = {}
    try:
        for fam in text_string_to_metric_families(text):
            if fam.type in ("histogram", "gaugehistogram"):
                for s in fam.samples:
                    labels = {k: v for k, v in s.labels.items() if k != "le"}
                    key = (fam.name, _label_key(labels))
                    h = hists.get(key)
                    if h is None:
                        h = hists[key] = Histogram(fam.name, labels)
                    if s.name.endswith("_bucket") and "le" in s.labels:
                        h.buckets.append((float(s.labels["le"]), float(s.value)))
                    elif s.name.endswith("_sum") or s.name.endswith("_gsum"):
                        h.sum = float(s.value)
                    elif s.name.endswith("_count") or s.name.endswith("_gcount"):
                        h.count = float(s.value)
                continue
            for s in fam.samples:
                name = s.name
                if name not in exposed and name.endswith("_total") and name[:-6] in exposed:
                    name = name[:-6]
                series.append(Series(name, fam.name, fam.type, dict(s.labels), float(s.value)))
    except (ValueError, TypeError, KeyError, IndexError) as e:
        raise MalformedStream(f"not valid Prometheus text exposition: {e}") from None
    for h in hists.values():
        h.buckets.sort(key=lambda b: b[0])
        if h.count is None and h.buckets and math.isinf(h.buckets[-1][0]):
            h.count = h.buckets[-1][1]
    return series, list(hists.values())


def merge_buckets(hists: Iterable[Histogram]) -> list[tuple[float, float]]:
    """Add the cumulative buckets of several series with the same bounds."""
    acc: dict[float, float] = {}
    for h in hists:
        for le, c in h.buckets:
            acc[le] = acc.get(le, 0.0) + c
    return sorted(acc.items())


def histogram_quantile(q: float, buckets: Sequence[tuple[float, float]]) -> float | None:
    """The q-quantile (0..1) of cumulative ``(upper_bound, count)`` buckets.

    Same rules as PromQL: linear interpolation inside the bucket that holds the rank,
    the lowest bucket starts at 0 (when its bound is positive), and a rank in the +Inf
    bucket returns the highest finite bound. None when there are no observations.
    """
    if not buckets or not 0.0 <= q <= 1.0:
        return None
    total = buckets[-1][1]  # the +Inf bucket (or, without one, the best total we have)
    if total <= 0:
        return None
    rank = q * total
    prev_le, prev_c = 0.0, 0.0
    for i, (le, c) in enumerate(buckets):
        if c >= rank and c > prev_c:
            if math.isinf(le):
                return prev_le if i > 0 else None
            lower = prev_le if i > 0 else (0.0 if le > 0 else le)
            return lower + (le - lower) * (rank - prev_c) / (c - prev_c)
        prev_le, prev_c = le, c
    return prev_le if not math.isinf(prev_le) else None


def bucket_delta(
    now: Sequence[tuple[float, float]], before: Sequence[tuple[float, float]] | None
) -> list[tuple[float, float]] | None:
    """Bucket counts observed between two scrapes (None on a counter reset or a
    change of bucket layout, where only the current totals can be trusted)."""
    if before is None:
        return None
    prev = dict(before)
    out: list[tuple[float, float]] = []
    for le, c in now:
        if le not in prev:
            return None
        d = c - prev[le]
        if d < 0:
            return None
        out.append((le, d))
    return out
