"""Other tools' statistics in our shapes: a level's aggregate from a file that holds
aggregates alone, and a tool's own per-request definition summarised beside ours."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from infersight.importers.common import MAX_SPAN_S, Malformed, as_float, as_int
from infersight.stats.aggregate import aggregate
from infersight.stats.summary import empty_summary, summarize

__all__ = ["aggregate_from_stats", "tool_metric"]

#: Our summary key -> the names tools give it (first found wins).
_ALIASES: dict[str, tuple[str, ...]] = {
    "mean": ("mean", "avg"),
    "std": ("std", "std_dev", "stddev"),
    "min": ("min",),
    "max": ("max",),
    "p50": ("p50", "median"),
    "p90": ("p90",),
    "p95": ("p95",),
    "p99": ("p99",),
    "p99.9": ("p99.9", "p999", "p99p9"),
}


def flat_stats(stats: Mapping[str, Any]) -> dict[str, Any]:
    """A tool's statistics object with nested ``percentiles`` (GuideLLM) lifted up."""
    out = dict(stats)
    nested = stats.get("percentiles")
    if isinstance(nested, Mapping):
        out.update(nested)
    return out


def summary_from_stats(stats: Mapping[str, Any], scale: float) -> dict[str, Any]:
    """Our summary from a tool's statistics; ``scale`` turns its unit into seconds.
    Statistics the tool does not give stay None."""
    flat = flat_stats(stats)
    out = empty_summary()
    out["count"] = as_int(flat.get("count")) or 0
    for ours, names in _ALIASES.items():
        value = next((v for n in names if (v := as_float(flat.get(n))) is not None), None)
        out[ours] = None if value is None else value * scale
    return out


def aggregate_from_stats(
    concurrency: int | None,
    rate: float | None,
    *,
    ok_count: int | None,
    errors: int | None,
    request_rate: float | None,
    token_rate: float | None,
    latency: Mapping[str, tuple[Mapping[str, Any], float]],
) -> dict[str, Any]:
    """A level's aggregate in ``bench``'s shape from a tool's statistics alone.

    ``latency`` maps our summary key (``ttft_from_sent``, ``tpot``, ``itl``,
    ``e2e_from_sent``) to the tool's statistics and their unit in seconds. TTFT and e2e
    from the actual send also stand for ours (from the intended send): the file has no
    intended send times, and the aggregate says so.
    """
    agg = aggregate([], target_concurrency=concurrency, target_rate=rate)
    ok = ok_count or 0
    err = errors or 0
    agg["requests"].update(
        {"total": ok + err, "ok": ok, "errors": err, "in_window": ok + err, "in_window_ok": ok}
    )
    agg["success_rate"] = ok / (ok + err) if ok + err else None
    agg["request_throughput"] = request_rate
    agg["output_token_throughput"] = token_rate
    agg["achieved_rate"] = request_rate
    for key, (stats, scale) in latency.items():
        if stats:
            agg[key] = summary_from_stats(stats, scale)
    for ours, theirs in (("ttft", "ttft_from_sent"), ("e2e", "e2e_from_sent")):
        if agg[ours]["count"] == 0 and agg[theirs]["count"]:
            agg[ours] = dict(agg[theirs])
    agg["window"]["method"] = "the tool's own aggregates"
    agg["basis"]["latency"]["window"] = "the tool's own aggregates"
    agg["imported"] = {
        "aggregates_only": True,
        "note": "TTFT and e2e count from the actual send: the file holds no intended send times",
    }
    return agg


def tool_metric(
    definition: str,
    *,
    ours: str | None,
    values: Iterable[float] = (),
    scale: float = 1.0,
    summary: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A tool's own metric beside ours: its definition, the name of ours it equals (None
    when none does) and its summary in seconds, from per-request ``values`` in the
    tool's unit (``scale`` to seconds) or from the tool's own ``summary``."""
    if summary is not None:
        summ = summary_from_stats(summary, scale)
    else:
        seconds = [v * scale for v in values]
        if far := [v for v in seconds if abs(v) > MAX_SPAN_S]:
            raise Malformed(
                f"{definition.split(':')[0]} holds {far[0]:.3g} s for one request: "
                "longer than the 30 days a result may span"
            )
        summ = summarize(seconds)
    return {"definition": definition, "ours": ours, "summary": summ}
