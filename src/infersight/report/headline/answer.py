"""The answer every output starts with: the best operating point (per SLO goal when the
run has goals), the main verdict and the run's one fix (its recommendation, with what it
predicts and rests on); then the evidence.

The console, the HTML page and the Markdown summary all print these same sentences.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from infersight.core.durations import format_duration
from infersight.core.errors import ConfigError
from infersight.core.numbers import number_at
from infersight.core.records import RunResult
from infersight.core.verdicts import Verdict
from infersight.report.capacity_curve import advice_lines
from infersight.report.model_lines import model_lines
from infersight.report.svg.axes import fmt_value
from infersight.stats.aggregate import parse_slo_key
from infersight.stats.level_flags import flagged
from infersight.stats.operating_point import best_level

__all__ = [
    "Headline",
    "OperatingPoint",
    "build_headline",
    "find_max_text",
    "slo_text",
    "verdict_where",
]

_METRIC = {
    "ttft": "TTFT",
    "ttft_from_sent": "TTFT from send",
    "tpot": "TPOT",
    "itl": "ITL",
    "e2e": "e2e",
    "e2e_from_sent": "e2e from send",
}
#: Verdicts that say the measurement itself is in doubt: they come first.
_DOUBT = ("client_limited", "error_driven", "overloaded")
_QUIET = ("healthy", "under_loaded")


@dataclass
class OperatingPoint:
    """The level with the most throughput that meets ``goal`` and is sustainable."""

    goal: str
    level: str | None
    agg: dict[str, Any] = field(default_factory=dict)

    def text(self) -> str:
        if self.level is None:
            return f"{self.goal}: no level qualifies"
        return f"{self.goal}: {self.level} at {point_figures(self.agg)}"


@dataclass
class Headline:
    points: list[OperatingPoint]
    verdict: Verdict | None
    fix: str | None
    find_max: str | None = None
    #: Why no point qualifies, or what limits the figures (e.g. a client-limited run).
    caveat: str | None = None
    #: After the fix: what it is expected to do and what that rests on.
    advice: list[tuple[str, str]] = field(default_factory=list)

    def lines(self, origin: float | None = None, *, summary: bool = False) -> list[tuple[str, str]]:
        """(label, text) pairs in reading order; ``summary`` adds the verdict's summary."""
        out = [("best operating point", p.text()) for p in self.points]
        if self.find_max:
            out.append(("find-max", self.find_max))
        if self.verdict is not None:
            v = self.verdict
            text = f"{v.title or v.id} ({verdict_where(v, origin)})"
            out.append(("main verdict", text + (f": {v.summary}" if summary else "")))
        if self.fix:
            out.append(("fix", self.fix))
        out += self.advice
        if self.caveat:
            out.append(("caveat", self.caveat))
        return out


def point_figures(agg: Mapping[str, Any]) -> str:
    """``5.1 req/s, 412 output tok/s, TTFT p99 820 ms, ITL p99 41 ms``."""
    parts = [
        f"{number_at(agg.get('request_throughput')) or 0:.3g} req/s",
        f"{number_at(agg.get('output_token_throughput')) or 0:.4g} output tok/s",
    ]
    for metric, label in (("ttft", "TTFT p99"), ("itl", "ITL p99"), ("e2e", "e2e p99")):
        v = number_at((agg.get(metric) or {}).get("p99"))
        if v is not None:
            parts.append(f"{label} {fmt_value(v, 's')}")
    return ", ".join(parts)


def slo_text(slo: Mapping[str, float]) -> str:
    """``{"ttft_p99": 0.5}`` -> ``TTFT p99 < 500ms`` (goals joined by "and")."""
    parts = []
    for key, limit in slo.items():
        try:
            metric, stat = parse_slo_key(key)
        except ConfigError:  # a key from a newer version: show it as written
            metric, stat = key, ""
        name = f"{_METRIC.get(metric, metric)} {stat}".strip()
        parts.append(f"{name} < {format_duration(float(limit))}")
    return " and ".join(parts)


def find_max_text(fm: Mapping[str, Any]) -> str:
    """The ``--find-max`` answer as a sentence."""
    goal = slo_text(fm.get("slo") or {}) or "the goals"
    cap = number_at(fm.get("capacity"))
    cap_txt = f" (capacity without goals: {cap:.3g} req/s)" if cap else ""
    best = number_at(fm.get("max_rate"))
    if best is None:
        return f"none of the rates tried meets {goal}{cap_txt}"
    return f"the highest sustainable rate meeting {goal} is {best:.3g} req/s{cap_txt}"


def verdict_where(v: Verdict, origin: float | None = None) -> str:
    """``level c=4, 12-40 s``: which level and window a verdict is about."""
    o = v.window.start if origin is None else origin
    a, b = v.window.start - o, v.window.end - o
    span = f"{a:.0f}-{b:.0f} s" if b - a >= 10 else f"{a:.1f}-{b:.1f} s"
    return f"level {v.level}, {span}" if v.level else span


def _best(
    levels: Sequence[tuple[str, Mapping[str, Any]]],
    goal: str,
    key: str | None,
    *,
    goals: bool = True,
    knee: str | None = None,
) -> OperatingPoint:
    """Among the levels that count (sustainable, not client-limited beyond a marginal
    flag) and meet the goals (or the goal ``key``), the knee: the lowest-latency one
    within 5% of the best throughput (``stats.operating_point``)."""
    ok = []
    for level, agg in levels:
        checks = (agg.get("slo") or {}).get("checks") or {}
        met = (
            (agg.get("slo") or {}).get("met") if key is None else (checks.get(key) or {}).get("met")
        )
        if met or not goals:  # best_level keeps those that count (and the knee)
            ok.append((level, agg))
    name = best_level(ok, knee_level=knee)
    if name is None:
        return OperatingPoint(goal, None)
    return OperatingPoint(goal, name, dict(next(a for n, a in ok if n == name)))


def main_verdict(verdicts: Sequence[Verdict], level_order: Sequence[str]) -> Verdict | None:
    """The verdict to read first (for a run without a stored recommendation): one that
    puts the measurement in doubt, else the first (most actionable) verdict of the most
    loaded level that found a limit. A marginal verdict is never the headline."""
    verdicts = [v for v in verdicts if not v.marginal]
    doubt = [v for v in verdicts if v.id in _DOUBT]
    if doubt:
        return doubt[0]
    rank = {name: i for i, name in enumerate(level_order)}
    found = [v for v in verdicts if v.id not in _QUIET] or list(verdicts)
    if not found:
        return None
    top = max(rank.get(v.level or "", -1) for v in found)
    return next(v for v in found if rank.get(v.level or "", -1) == top)


def build_headline(
    result: RunResult,
    levels: Sequence[tuple[str, Mapping[str, Any]]],
    verdicts: Sequence[Verdict] | None = None,
) -> Headline:
    """The headline of a run whose levels (name, aggregate) are in load order."""
    slo: dict[str, float] = dict(result.config.get("slo") or {})
    curve = result.capacity_curve
    knee = curve.knee_level if curve is not None else None
    points: list[OperatingPoint] = []
    if slo:
        points.append(_best(levels, f"meeting {slo_text(slo)}", None, knee=knee))
        if len(slo) > 1:
            points += [
                _best(levels, f"meeting {slo_text({k: v})}", k, knee=knee) for k, v in slo.items()
            ]
    elif levels:
        points.append(
            _best(
                levels,
                "the knee: lowest latency within 5% of the best "
                "sustainable throughput (no goals given)",
                None,
                goals=False,
                knee=knee,
            )
        )
    vs = list(result.diagnosis if verdicts is None else verdicts)
    order = [n for n, _ in levels]
    rec = result.recommendation
    main = _rec_verdict(vs, rec.verdict, order) if rec is not None else None
    main = main or main_verdict(vs, order)
    caveat = None
    if levels and all(p.level is None for p in points):
        caveat = (
            "every level was client-limited: the load generator, not the server, set these figures"
            if any(flagged(dict(a)) for _, a in levels)
            else "no level was both sustainable and within the goals"
        )
    elif rec is not None:
        doubt = [v for v in vs if v.id in _DOUBT and not v.marginal and v is not main]
        if doubt:
            at = f" (level {doubt[0].level})" if doubt[0].level else ""
            caveat = f"{doubt[0].title}{at}: {doubt[0].summary}"
    fm = result.config.get("find_max")
    return Headline(
        points=points,
        verdict=main,
        fix=rec.text
        if rec is not None
        else (main.fixes[0] if main is not None and main.fixes else None),
        find_max=find_max_text(fm) if isinstance(fm, dict) else None,
        caveat=caveat,
        advice=(advice_lines(rec)[1:] if rec is not None else []) + model_lines(result),
    )


def _rec_verdict(verdicts: Sequence[Verdict], vid: str, order: Sequence[str]) -> Verdict | None:
    """The verdict the run's recommendation came from, at the most loaded level."""
    rank = {name: i for i, name in enumerate(order)}
    found = [v for v in verdicts if v.id == vid]
    return max(found, key=lambda v: rank.get(v.level or "", -1)) if found else None
