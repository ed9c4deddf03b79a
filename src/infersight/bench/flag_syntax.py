"""The compact syntaxes of bench's flags (lists of levels, SLOs), parsed the same way
for the CLI and for :class:`~infersight.bench.config.BenchConfig`."""

from __future__ import annotations

import re

from infersight.core.durations import parse_duration
from infersight.core.errors import ConfigError
from infersight.flags.declare import parse_levels
from infersight.stats.aggregate import SLO_METRICS, parse_slo_key

__all__ = ["parse_levels", "parse_slo"]


_SLO_RE = re.compile(r"^\s*([a-z0-9_.]+)\s*(<=|<)\s*(\S+)\s*$")


def parse_slo(text: str) -> dict[str, float]:
    """``"ttft_p99<500ms,tpot_p99<50ms"`` -> ``{"ttft_p99": 0.5, "tpot_p99": 0.05}``.

    Limits are durations with a unit (us, ms, s, m): a bare number would be seconds in
    every other flag but milliseconds in vLLM's ``--goodput``, so it is refused here.
    A metric without a statistic (``e2e<2s``) applies to every request (``e2e_max``).
    """
    out: dict[str, float] = {}
    for part in (p for p in text.split(",") if p.strip()):
        m = _SLO_RE.match(part.lower())
        if not m:
            raise ConfigError(
                f"--slo {part.strip()!r}: expected e.g. 'ttft_p99<500ms' or 'tpot_p50<30ms'"
            )
        key, _, value = m.groups()
        try:
            metric, stat = parse_slo_key(key)
        except ConfigError:
            raise ConfigError(
                f"--slo {key!r}: metric must be one of {', '.join(SLO_METRICS)} with an "
                f"optional _p50/_p90/_p95/_p99/_p99.9/_mean/_max"
            ) from None
        key = f"{metric}_{stat}"
        if re.fullmatch(r"[\d.]+", value):
            raise ConfigError(
                f"--slo {part.strip()!r}: give the limit a unit, e.g. {value}ms or {value}s"
            )
        limit = parse_duration(value, f"--slo {part.strip()!r}:")
        if limit <= 0:
            raise ConfigError(f"--slo {part.strip()!r}: the limit must be positive")
        out[key] = limit
    if not out:
        raise ConfigError("--slo: give at least one goal, e.g. 'ttft_p99<500ms'")
    return out
