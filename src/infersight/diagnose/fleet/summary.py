"""The fleet summary: replicas grouped by their main verdict, the windows where
requests waited longest, and the headline sentences on top."""

from __future__ import annotations

from collections.abc import Mapping

from infersight.core.fleet import FleetGroup, FleetReport, WorstWindow
from infersight.core.verdicts import VERDICT_IDS
from infersight.diagnose.fleet.window import WindowRow

__all__ = ["summarize"]

#: How many worst windows the summary lists.
WORST = 5
_ORDER = {vid: i for i, vid in enumerate(VERDICT_IDS)}
_WORDS = {
    "slot_bound": "slot-bound",
    "kv_bound": "KV-bound",
    "capacity": "at capacity",
    "under_loaded": "under-loaded",
    "busy_illusion": 'busy only in name ("100% busy" illusion)',
    "host_starved": "host-starved",
    "healthy": "healthy",
    "error_driven": "failing requests",
    "bandwidth_bound_decode": "bandwidth-bound in decode",
    "compute_bound_prefill": "compute-bound in prefill",
}


def _worst(rows: Mapping[str, list[WindowRow]]) -> list[WorstWindow]:
    out = []
    for rid, rs in rows.items():
        for row in rs:
            q = row.Q or 0.0
            if q < 0.5:
                continue
            top = min(range(len(row.ids)), key=lambda i: _ORDER.get(row.ids[i], 99), default=None)
            out.append(
                WorstWindow(
                    replica=rid,
                    verdict=row.ids[top] if top is not None else "",
                    title=row.titles[top] if top is not None else "",
                    start=row.start,
                    end=row.end,
                    waiting=row.Q,
                    ttft_p99=row.ttft_p99,
                    queued_request_seconds=q * row.seconds,
                )
            )
    out.sort(key=lambda r: (-r.queued_request_seconds, -(r.ttft_p99 or 0.0), r.start))
    return out[:WORST]


def _model_line(model: str, mains: dict[str, str], imbalance: str | None) -> str:
    if imbalance:  # the balance verdict's sentence, without its replica lists
        return imbalance.split(" (queued:")[0].rstrip(".")
    n = len(mains)
    counts: dict[str, int] = {}
    for vid in mains.values():
        counts[vid] = counts.get(vid, 0) + 1
    order = sorted(counts, key=lambda v: (-counts[v], _ORDER.get(v, 99)))
    parts = [f"{counts[v]} {_WORDS.get(v, v)}" for v in order]
    return f"{model}: {n} replica{'s' if n != 1 else ''}, " + ", ".join(parts)


def summarize(report: FleetReport, records: Mapping[str, list[WindowRow]]) -> None:
    """Fill ``report.groups``, ``report.worst`` and ``report.headline``."""
    by_main: dict[str, list[str]] = {}
    titles: dict[str, str] = {}
    models: dict[str, dict[str, str]] = {}
    for rd in report.replicas:
        if not rd.verdicts:
            continue
        by_main.setdefault(rd.main, []).append(rd.replica.id)
        titles[rd.main] = rd.main_title
        models.setdefault(rd.replica.model or rd.replica.job or "?", {})[rd.replica.id] = rd.main
    report.groups = [
        FleetGroup(verdict=v, title=titles[v], replicas=sorted(rids))
        for v, rids in sorted(by_main.items(), key=lambda kv: _ORDER.get(kv[0], 99))
    ]
    report.worst = _worst(records)
    imbalance: dict[str, str] = {}
    for v in sorted(report.balance, key=lambda v: v.window.start - v.window.end):
        model = next((str(e.value) for e in v.evidence if e.key == "model"), "")
        imbalance.setdefault(model, v.summary)  # the longest run of windows
    n = sum(len(m) for m in models.values())
    silent = sum(1 for rd in report.replicas if not rd.verdicts)
    head = [
        f"{n} replica{'s' if n != 1 else ''} of {len(models)} "
        f"model{'s' if len(models) != 1 else ''}"
        + (f" ({silent} without data in the range)" if silent else "")
        + ":"
    ]
    # imbalanced models first: the fleet's own problem before each replica's
    order = sorted(models, key=lambda m: (m not in imbalance, m))
    head += [_model_line(m, models[m], imbalance.get(m)) for m in order]
    if report.worst:
        w = report.worst[0]
        head.append(
            f"longest wait: {w.replica}, {w.waiting:.1f} requests waiting on average ({w.title})"
        )
    report.headline = head
