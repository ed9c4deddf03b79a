"""How faithful a replay was, from its records alone (so it can be recomputed).

A replayed request's record carries what the trace intended in its labels: ``in``
(prompt tokens, as the server counts them), ``out`` (output tokens) and, in a
conversation, ``session`` and ``turn``. :func:`replay_fidelity` sets the server's
``usage`` against them, and :func:`by_turn` gives TTFT per turn index (later turns
have longer prompts and more prefix to reuse).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from infersight.core.records import RequestRecord
from infersight.stats.prefix_cache import client_cache
from infersight.stats.summary import summarize

__all__ = ["by_turn", "replay_fidelity", "replay_notes", "session_sharing"]


def _int(labels: dict[str, str], key: str) -> int | None:
    v = labels.get(key)
    try:
        return None if v is None else int(v)
    except ValueError:
        return None


def replay_fidelity(records: Sequence[RequestRecord]) -> dict[str, Any] | None:
    """Send lag against the trace, and token lengths sent against intended (None when
    the records are not a replay's)."""
    recs = [r for r in records if "in" in r.labels]
    if not recs:
        return None
    lag = summarize([r.schedule_lag for r in recs if r.schedule_lag is not None])
    p_err = [
        r.prompt_tokens - n
        for r in recs
        if r.prompt_tokens is not None and (n := _int(r.labels, "in")) is not None
    ]
    done = [r for r in recs if r.ok and r.completion_tokens is not None]
    o_err = [r.output_tokens - n for r in done if (n := _int(r.labels, "out")) is not None]
    arr = np.abs(np.asarray(p_err, dtype=float))
    return {
        "requests": len(recs),
        "send_lag": {
            "p50": lag["p50"],
            "p99": lag["p99"],
            "max": lag["max"],
            "count": lag["count"],
        },
        "prompt_tokens_error": {
            "count": len(p_err),
            "mean": float(np.mean(p_err)) if p_err else None,
            "abs_p50": float(np.percentile(arr, 50)) if p_err else None,
            "abs_p99": float(np.percentile(arr, 99)) if p_err else None,
            "exact": sum(1 for e in p_err if e == 0),
        },
        "output_tokens_error": {
            "count": len(o_err),
            "mean": float(np.mean(o_err)) if o_err else None,
            "short": sum(1 for e in o_err if e < 0),
        },
    }


def by_turn(records: Iterable[RequestRecord]) -> dict[str, dict[str, Any]] | None:
    """TTFT and prompt length per conversation turn index (None: no conversations)."""
    turns: dict[int, list[RequestRecord]] = defaultdict(list)
    for r in records:
        t = _int(r.labels, "turn")
        if t is not None:
            turns[t].append(r)
    if not turns:
        return None
    out = {}
    for t in sorted(turns):
        rs = turns[t]
        ok = [r for r in rs if r.ok]
        ttft = summarize([r.ttft for r in ok if r.ttft is not None])
        prompts = [r.prompt_tokens for r in ok if r.prompt_tokens is not None]
        out[str(t)] = {
            "requests": len(rs),
            "ok": len(ok),
            "ttft_p50": ttft["p50"],
            "ttft_p99": ttft["p99"],
            "prompt_tokens_mean": float(np.mean(prompts)) if prompts else None,
            "cache_hit_rate": client_cache(ok)["hit_rate"],
        }
    return out


def session_sharing(records: Iterable[RequestRecord]) -> float | None:
    """The share of conversation prompt tokens that repeat the previous turn (its
    prompt and the answer received), by the server's counts."""
    convs: dict[str, list[RequestRecord]] = defaultdict(list)
    for r in records:
        if "session" in r.labels and r.ok and r.prompt_tokens:
            convs[r.labels["session"]].append(r)
    shared = total = 0
    for rs in convs.values():
        rs.sort(key=lambda r: _int(r.labels, "turn") or 0)
        prev: RequestRecord | None = None
        for r in rs:
            assert r.prompt_tokens is not None
            total += r.prompt_tokens
            if prev is not None and prev.prompt_tokens is not None:
                shared += min(r.prompt_tokens, prev.prompt_tokens + prev.output_tokens)
            prev = r
    return shared / total if total else None


def _ms(v: Any) -> str:
    return "-" if not isinstance(v, int | float) else f"{v * 1e3:.1f} ms"


def _pct(v: Any) -> str:
    return "-" if not isinstance(v, int | float) else f"{v:.0%}"


def replay_notes(name: str, agg: dict[str, Any]) -> list[tuple[str, str]]:
    """``(kind, text)`` lines for a level's replay fidelity, prefix sharing and cache,
    and TTFT per conversation turn (see :func:`infersight.stats.level_flags.level_notes`)."""
    out: list[tuple[str, str]] = []
    rp = agg.get("replay") or {}
    ps = agg.get("prefix_sharing") or {}
    if rp.get("requests"):
        lag, pe, oe = (
            rp.get("send_lag") or {},
            rp.get("prompt_tokens_error") or {},
            rp.get("output_tokens_error") or {},
        )
        text = (
            f"{name} replay: send lag against the trace p50 {_ms(lag.get('p50'))}, p99 "
            f"{_ms(lag.get('p99'))}; prompt tokens as intended in {pe.get('exact', 0)} of "
            f"{pe.get('count', 0)} (mean error {pe.get('mean') or 0:+.1f})"
        )
        if oe.get("short"):
            text += (
                f"; {oe['short']} answers ended before the trace's output length "
                "(--ignore-eos makes the server generate it)"
            )
        out.append(("replay", text))
    if ps.get("intended") is not None or ps.get("sent") is not None:
        out.append(
            (
                "prefix_sharing",
                f"{name} prefix sharing: {_pct(ps.get('intended'))} of "
                f"prompt tokens intended, {_pct(ps.get('sent'))} sent",
            )
        )
    pc = agg.get("prefix_cache") or {}
    parts = [
        f"{_pct(v.get('hit_rate'))} ({'engine counters' if side == 'engine' else 'answers'})"
        for side in ("engine", "client")
        if isinstance(v := pc.get(side), dict) and v.get("hit_rate") is not None
    ]
    if parts:
        out.append(("prefix_cache", f"{name} prefix-cache hit rate: {', '.join(parts)}"))
    turns = rp.get("turns") or {}
    if turns:
        cells = [
            f"{k}: {_ms(t.get('ttft_p50'))}/{_ms(t.get('ttft_p99'))} "
            f"({t.get('prompt_tokens_mean') or 0:.0f} tok)"
            for k, t in turns.items()
        ]
        out.append(("turns", f"{name} TTFT p50/p99 by turn: " + "; ".join(cells)))
    return out
