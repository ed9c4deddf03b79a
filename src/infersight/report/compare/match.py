"""Which levels of several runs may be compared (docs/design.md section 2, "Comparing
runs").

Levels are matched on the offered load (the same concurrency, or a rate within 5%)
and on the workload fingerprint (prompt and output lengths, a two-sample
Kolmogorov-Smirnov test at p > 0.01 on each). A level without a match in every run is
listed as not comparable, with the reason, and never pooled with another.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from infersight.report.view import LevelView

__all__ = ["match_levels"]

#: Two open-loop levels offer the same load when their rates differ by at most this.
RATE_TOLERANCE = 0.05
#: Two levels share a workload unless a KS test on their lengths falls to this p-value.
WORKLOAD_P = 0.01


@dataclass(frozen=True, slots=True)
class Unmatched:
    """A level of one run that no level of another run matches, and why."""

    run: int
    level: str
    reason: str

    def text(self, labels: Sequence[str]) -> str:
        return f"{labels[self.run]} level {self.level}: not comparable: {self.reason}"


def _target(lv: LevelView) -> tuple[Any, Any]:
    t = lv.agg.get("target") or {}
    return t.get("concurrency"), t.get("rate")


def same_load(a: LevelView, b: LevelView) -> bool:
    """The same concurrency, or rates within 5% (levels with no target: by name)."""
    (ca, ra), (cb, rb) = _target(a), _target(b)
    if ca is not None or cb is not None:
        return bool(ca == cb)
    if ra is None and rb is None:
        return a.name == b.name
    if ra is None or rb is None:
        return False
    return abs(float(ra) - float(rb)) <= RATE_TOLERANCE * max(float(ra), float(rb))


def same_workload(a: Sequence[LevelView], b: Sequence[LevelView]) -> str:
    """ "" when the prompt and output lengths may come from one distribution, else which
    lengths differ (two-sample KS, p > 0.01 on each)."""
    # Imported here, not at the top: scipy.stats adds about 1 s to every command that
    # imports report (measured over `import infersight.report`, 2-core box), and only
    # `report A B` compares workloads.
    from scipy.stats import ks_2samp

    def lengths(side: Sequence[LevelView], name: str) -> list[int]:
        recs = (r for lv in side for r in lv.records if r.ok)
        if name == "prompt":
            return [r.prompt_tokens for r in recs if r.prompt_tokens is not None]
        return [r.output_tokens for r in recs]

    for name in ("prompt", "output"):
        xa, xb = lengths(a, name), lengths(b, name)
        if len(xa) < 2 or len(xb) < 2 or len(set(xa) | set(xb)) == 1:
            continue
        p = float(ks_2samp(xa, xb).pvalue)
        if p <= WORKLOAD_P:
            return f"different workload ({name} lengths differ, KS p = {p:.2g})"
    return ""


def match_levels(
    groups: Sequence[dict[str, list[LevelView]]],
) -> tuple[list[tuple[str, list[list[LevelView]]]], list[Unmatched]]:
    """Matched levels (named after the baseline's), and every level left unmatched.

    A baseline level is compared only when every other run has a level at the same
    load and with the same workload; a level of the same name is preferred.
    """
    matched: list[tuple[str, list[list[LevelView]]]] = []
    unmatched: list[Unmatched] = []
    used: list[set[str]] = [set() for _ in groups]
    for name, base in groups[0].items():
        runs, why = [base], ""
        for i, other in enumerate(groups[1:], start=1):
            cands = sorted(
                (n for n in other if n not in used[i] and same_load(base[0], other[n][0])),
                key=lambda n: n != name,
            )
            if not cands:
                why = why or f"different load (no level of run {i} matches it)"
                continue
            runs.append(other[cands[0]])
            if reason := same_workload(base, other[cands[0]]):
                why = why or reason
                unmatched.append(Unmatched(i, cands[0], reason))
        if why:
            unmatched.append(Unmatched(0, name, why))
            continue
        for i, got in enumerate(runs[1:], start=1):
            used[i].add(next(n for n, v in groups[i].items() if v is got))
        matched.append((name, runs))
    for i, other in enumerate(groups[1:], start=1):
        seen = {u.level for u in unmatched if u.run == i}
        unmatched += [
            Unmatched(i, n, "different load (no level of the baseline matches)")
            for n in other
            if n not in used[i] and n not in seen
        ]
    return matched, unmatched
