"""The prefix cache's hit rate, from both sides of a run.

- The client's view (:func:`client_cache`): each answer's
  ``usage.prompt_tokens_details.cached_tokens`` (OpenAI's field; llama.cpp fills it,
  vLLM with ``--enable-prompt-tokens-details``, hosted APIs with a prompt cache).
- The engine's view (:func:`engine_cache`): its counters, normalised by the engine
  table to ``engine.prefix_cache_hits_total`` / ``engine.prefix_cache_queries_total``
  (prompt tokens; vLLM, SGLang, llama.cpp), or SGLang's own
  ``engine.prefix_cache_hit_ratio`` gauge when only that is there.

Both are rates over prompt tokens, per load level (:func:`add_engine_cache`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from infersight.core.records import RequestRecord, RunResult, Sample

__all__ = ["add_engine_cache", "client_cache", "engine_cache"]

HITS = "engine.prefix_cache_hits_total"
QUERIES = "engine.prefix_cache_queries_total"
RATIO = "engine.prefix_cache_hit_ratio"
#: A counter is read this long after the level's last answer (the next scrape).
SETTLE_S = 2.0


def client_cache(records: Iterable[RequestRecord]) -> dict[str, Any]:
    """Prompt tokens served from the prefix cache, as each answer's ``usage`` said."""
    known = [r for r in records if r.cached_tokens is not None and r.prompt_tokens]
    cached = sum(r.cached_tokens or 0 for r in known)
    prompt = sum(r.prompt_tokens or 0 for r in known)
    return {
        "requests": len(known),
        "cached_tokens": cached,
        "prompt_tokens": prompt,
        "hit_rate": cached / prompt if prompt else None,
        "source": "usage.prompt_tokens_details.cached_tokens of each answer",
    }


def _increase(
    points: list[tuple[float, float]], t0: float, t1: float, born: bool = False
) -> float | None:
    """A counter's increase over ``[t0, t1]``: from its last value at or before
    ``t0`` (else its first in the span, or 0 when it was ``born`` in the span) to its
    last at or before ``t1``."""
    points.sort()
    before = [v for t, v in points if t <= t0]
    inside = [v for t, v in points if t0 < t <= t1]
    start = before[-1] if before else (0.0 if born else inside[0] if inside else None)
    end = inside[-1] if inside else None
    if start is None or end is None:
        return None
    return max(0.0, end - start)


def engine_cache(samples: Iterable[Sample], t0: float, t1: float) -> dict[str, Any] | None:
    """The engine's hit rate over ``[t0, t1 + SETTLE_S]``; None without its counters."""
    series: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    ratios: list[float] = []
    for s in samples:
        if s.value is None:
            continue
        if s.name in (HITS, QUERIES):
            series[(s.name, s.labels.get("source", ""))].append((s.t, float(s.value)))
        elif s.name == RATIO and t0 <= s.t <= t1 + SETTLE_S:
            ratios.append(float(s.value))
    end = t1 + SETTLE_S
    sources = {src for name, src in series if name == QUERIES}
    hits = queries = 0.0
    for src in sources:
        qs = series[(QUERIES, src)]
        q = _increase(qs, t0, end)
        if q is None:
            continue
        queries += q
        # SGLang's hits counter appears with its first hit: absent means none yet
        born = any(t <= t0 for t, _ in qs)
        hits += _increase(series.get((HITS, src), []), t0, end, born) or 0.0
    if queries > 0:
        return {
            "hits": hits,
            "queries": queries,
            "hit_rate": hits / queries,
            "sources": len(sources),
            "source": f"engine /metrics ({HITS} / {QUERIES}, increase over the level)",
        }
    if ratios:
        return {
            "hit_rate": sum(ratios) / len(ratios),
            "sources": 1,
            "source": f"engine /metrics ({RATIO}, mean over the level)",
        }
    return None


def add_engine_cache(result: RunResult) -> None:
    """Put the engine's hit rate into each level's aggregate (``prefix_cache.engine``)."""
    spans: dict[str, list[float]] = {}
    for r in result.records:
        name = r.labels.get("level")
        if name is None:
            continue
        end = r.end if r.end is not None else r.scheduled
        span = spans.setdefault(name, [r.scheduled, end])
        span[0], span[1] = min(span[0], r.scheduled), max(span[1], end)
    for name, (a, b) in spans.items():
        agg = result.aggregates.get(name)
        if isinstance(agg, dict):
            got = engine_cache(result.samples, a, b)
            if got is not None:
                agg.setdefault("prefix_cache", {})["engine"] = got
