"""The search over one knob's values (docs/design.md section 8), in index space.

The searches see the settings only through two functions, which measure a setting the
first time they need it:

- ``value(i)``: the objective of setting ``i`` (None when its trial failed);
- ``compare(i, j)``: +1 when ``i`` is better than ``j`` beyond the noise floor, -1 when
  worse, 0 when neither (the same within the noise, or inconclusive).

**Guided** (threads and context, which the model of the server cannot vary, and slots
when the model cannot be fitted; over slots the model proposes, ``tune.propose``): from
the current setting, the diagnosis's target is tried first. While each
step climbs (better, or the same within the noise with a higher estimate) the walk goes
on in the same direction with doubling steps; then the bracket around the best point
is bisected (the wider side first) until no untried value is left inside it. When the
recommended direction found nothing better, the other side is walked once.

**Grid**: every value, the exhaustive reference.

**The choice** (:func:`choose`) is the same for both: among the settings within 5% of
the best measured one, the cheapest: for slots and threads the smallest, for context the
largest. It is the knee of docs/design.md section 5: more of a knob that buys less than
that is not advice.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

__all__ = ["StopSearch", "choose", "grid", "guided", "planned_trials"]

Value = Callable[[int], float | None]
Compare = Callable[[int, int], int]


class StopSearch(Exception):
    """Raised by ``value``/``compare`` when the budget is spent or the user stopped:
    the search ends and keeps what it measured."""


def _clamp(i: int, n: int) -> int:
    return max(0, min(n - 1, i))


def _walk(n: int, start: int, first: int, value: Value, compare: Compare, prefer_low: bool) -> bool:
    """Walk from ``start`` through ``first`` and on, then bisect around the best point;
    True when a setting better than ``start`` was found."""
    d = 1 if first > start else -1
    path, best = [start], 0
    probe = first
    while True:
        r = compare(probe, path[best])
        path.append(probe)
        if r > 0:
            best = len(path) - 1
        elif r < 0 or best > 0:
            # Worse: the top is behind. The same after a climb: the top is reached.
            # (The same before any climb says nothing: a flat stretch, walk on.)
            break
        nxt = _clamp(probe + d * max(1, 2 * abs(probe - path[-2])), n)
        if nxt == probe:
            break
        probe = nxt
    b = path[best]
    lo, hi = sorted((path[best - 1] if best else b, path[best + 1] if best + 1 < len(path) else b))
    while True:
        gaps = [g for g in ((lo, b), (b, hi)) if g[1] - g[0] > 1]
        if not gaps:
            break
        # The wider gap first; on a tie, the cheaper side.
        g = max(gaps, key=lambda g: (g[1] - g[0], (g[0] == lo) == prefer_low))
        m = (g[0] + g[1] + (0 if prefer_low else 1)) // 2
        r = compare(m, b)
        cheaper = (m < b) == prefer_low
        if r > 0:
            lo, hi = (lo, b) if m < b else (b, hi)
            b = m
        elif r == 0 and cheaper:
            b = m  # as good and cheaper; the dearer side stays open: the top may lie there
        elif r < 0:
            lo, hi = (m, hi) if m < b else (lo, m)
        else:
            # As good but dearer. When the far end ties both, that side is flat: the
            # top is reached there. Otherwise the top may still lie between (a peak
            # between two points that each tie the best so far).
            far = hi if m > b else lo
            flat = compare(far, b) == 0 and compare(far, m) == 0
            if m > b:
                hi = b if flat else m
            else:
                lo = b if flat else m
    return compare(b, start) > 0


def guided(
    n: int, start: int, guide: int, value: Value, compare: Compare, *, prefer_low: bool = True
) -> None:
    """Measure settings the guided way (see the module's docstring)."""
    try:
        value(start)
        if guide == start:  # no direction given: upwards first, unless at the top
            guide = start + 1 if start + 1 < n else start - 1
        if not 0 <= guide < n:
            return  # one value: nothing to search
        if not _walk(n, start, guide, value, compare, prefer_low):
            mirror = _clamp(2 * start - guide, n)
            if mirror == start:
                mirror = _clamp(start - (1 if guide > start else -1), n)
            if mirror != start:
                _walk(n, start, mirror, value, compare, prefer_low)
    except StopSearch:
        return


def grid(n: int, value: Value, order: Iterable[int] | None = None) -> None:
    """Measure every setting (``order``: the baseline first, say)."""
    seen: set[int] = set()
    try:
        for i in [*(order or []), *range(n)]:
            if i not in seen:
                seen.add(i)
                value(i)
    except StopSearch:
        return


def choose(
    measured: Iterable[int],
    value: Value,
    *,
    floor: float,
    prefer_low: bool = True,
) -> int | None:
    """The cheapest measured setting within ``floor`` of the best one's objective."""
    ok = [i for i in measured if value(i) is not None]
    if not ok:
        return None
    top = max(ok, key=lambda i: (value(i) or 0.0, -i if prefer_low else i))
    best = value(top) or 0.0
    close = [i for i in ok if i == top or (value(i) or 0.0) >= (1.0 - floor) * best]
    return min(close) if prefer_low else max(close)


def planned_trials(n: int, search: str) -> int:
    """How many trials a search of ``n`` values will probably take, with the A/A run
    and the winner's re-run (for the progress bar)."""
    if search == "grid":
        return n + 2
    steps = max(1, (n - 1).bit_length())
    return min(n, 2 * steps) + 2
