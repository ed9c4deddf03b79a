"""The load-imbalance verdict: replicas of one model that queue while their peers have
room, or whose utilisation spreads far apart, in the same window. The router, not the
replicas' capacity, is then what to fix: the fleet already has the capacity.
"""

from __future__ import annotations

from collections.abc import Mapping

from infersight.core.fleet import ReplicaInfo
from infersight.core.verdicts import Evidence, Verdict, VerdictWindow
from infersight.diagnose.analyze import _merge
from infersight.diagnose.fleet.window import WindowRow
from infersight.diagnose.rules.base import BUSY_LOW, SATURATED, UNDER_R_OF_S, evidence, fmt

__all__ = ["SPREAD", "classify", "imbalance_verdicts"]

#: Verdicts that mean requests wait on a replica.
QUEUE_VERDICTS = ("slot_bound", "kv_bound", "capacity")
#: Utilisation spread (max - min busy fraction) that is an imbalance by itself.
SPREAD = 0.5

_PHRASE = {"slot_bound": "slot-bound", "kv_bound": "KV-bound", "capacity": "at capacity"}


def classify(row: WindowRow) -> str:
    """``queued``, ``idle`` or ``busy`` for one replica's window."""
    if any(v in QUEUE_VERDICTS for v in row.ids):
        return "queued"
    if "under_loaded" in row.ids:
        return "idle"
    quiet = row.Q is not None and row.Q < 0.1
    if quiet and row.S and row.R is not None and row.R < UNDER_R_OF_S * row.S:
        return "idle"
    if quiet and row.busy is not None and row.busy < BUSY_LOW:
        return "idle"
    return "busy"


def _queue_phrase(queued: list[str], recs: dict[str, WindowRow]) -> str:
    """``slot-bound``, or ``queueing (1 slot-bound, 1 KV-bound)`` when they differ."""
    kinds: dict[str, int] = {}
    for rid in queued:
        top = next((v for v in recs[rid].ids if v in QUEUE_VERDICTS), "capacity")
        kinds[top] = kinds.get(top, 0) + 1
    if len(kinds) == 1:
        return _PHRASE[next(iter(kinds))]
    parts = [f"{n} {_PHRASE[k]}" for k, n in sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0]))]
    return f"queueing ({', '.join(parts)})"


def _fixes(engine: str) -> list[str]:
    return [
        "route each request to the replica with the fewest requests in flight (least "
        "outstanding requests, not round robin): `infersight gateway` routes this way; "
        "Envoy LEAST_REQUEST and NGINX least_conn do too",
        "a Kubernetes Service balances connections, not requests: clients that keep "
        "connections alive (HTTP keep-alive, HTTP/2, gRPC) stay pinned to one pod; put a "
        "request-level balancer (gateway, ingress, service mesh) in front of the replicas",
        "check session affinity and prefix-/cache-aware routing: hot prefixes or sticky "
        "sessions pin traffic to a few replicas; bound how far their load may drift apart",
        "if the idle replicas get no traffic at all, check that they are ready and are "
        f"endpoints of the Service ({engine} health and readiness probes)",
    ]


def _evidence(model: str, recs: dict[str, WindowRow], kinds: dict[str, str]) -> list[Evidence]:
    ev = [evidence("model", "model", model, "", "engine model_name label (or scrape job)")]
    in_sys = {rid: (r.R or 0.0) + (r.Q or 0.0) for rid, r in recs.items()}
    hi, lo = max(in_sys.values()), min(in_sys.values())
    ev.append(
        evidence(
            "in_system_spread",
            "requests in system, max / min replica",
            f"{hi:.1f} / {lo:.1f}",
            "requests",
            "engine /metrics (R + Q) per replica",
        )
    )
    busy = [r.busy for r in recs.values() if r.busy is not None]
    if len(busy) >= 2:
        src = next((r.busy_source for r in recs.values() if r.busy_source), "GPU series")
        ev.append(
            evidence(
                "busy_spread",
                "device busy spread (max - min)",
                max(busy) - min(busy),
                "fraction",
                src,
            )
        )
    for rid in sorted(recs):
        r = recs[rid]
        parts = [f"R {fmt(r.R)}", f"Q {fmt(r.Q)}"]
        if r.S:
            parts.append(f"S {r.S:.0f}")
        if r.busy is not None:
            parts.append(f"busy {r.busy * 100:.0f}%")
        main = r.titles[0] if r.titles else ""
        ev.append(
            evidence(
                f"replica.{rid}",
                rid,
                ", ".join(parts) + f" ({kinds[rid]}: {main})",
                "",
                "this window's verdict and engine /metrics",
            )
        )
    return ev


def _one(model: str, engine: str, recs: dict[str, WindowRow]) -> Verdict | None:
    kinds = {rid: classify(r) for rid, r in recs.items()}
    queued = sorted(r for r, k in kinds.items() if k == "queued")
    idle = sorted(r for r, k in kinds.items() if k == "idle")
    busy = {rid: r.busy for rid, r in recs.items() if r.busy is not None}
    spread = (max(busy.values()) - min(busy.values())) if len(busy) >= 2 else 0.0
    n = len(recs)
    if queued and idle:
        room = "under-loaded" if all("under_loaded" in recs[r].ids for r in idle) else "with room"
        summary = (
            f"{len(idle)} of {n} replicas of {model} {room} while {len(queued)} "
            f"{'is' if len(queued) == 1 else 'are'} {_queue_phrase(queued, recs)}: the "
            f"router is unbalanced (queued: {', '.join(queued[:4])}; room: "
            f"{', '.join(idle[:4])})."
        )
        conf = 0.85
    elif spread >= SPREAD and max(busy.values()) >= SATURATED:
        hot = max(busy, key=lambda k: busy[k])
        cold = min(busy, key=lambda k: busy[k])
        summary = (
            f"Device busy ranges from {busy[cold] * 100:.0f}% ({cold}) to "
            f"{busy[hot] * 100:.0f}% ({hot}) across the {n} replicas of {model}: the "
            "router sends them unequal load."
        )
        conf = 0.7
    else:
        return None
    first = next(iter(recs.values()))
    return Verdict(
        id="load_imbalance",
        title="Load imbalance across replicas",
        summary=summary,
        window=VerdictWindow(start=first.start, end=first.end),
        evidence=_evidence(model, recs, kinds),
        confidence=conf,
        fixes=_fixes(engine),
        level=model,
        engine=engine,
    )


def imbalance_verdicts(
    replicas: Mapping[str, ReplicaInfo], rows: Mapping[str, list[WindowRow]]
) -> list[Verdict]:
    """One ``load_imbalance`` verdict per model and run of windows where it holds."""
    groups: dict[tuple[str, str], list[str]] = {}
    for rid, info in replicas.items():
        groups.setdefault((info.engine, info.model), []).append(rid)
    out: list[Verdict] = []
    for (engine, model), rids in sorted(groups.items()):
        if len(rids) < 2:
            continue
        by_start: dict[float, dict[str, WindowRow]] = {}
        for rid in rids:
            for row in rows.get(rid, []):
                by_start.setdefault(round(row.start, 3), {})[rid] = row
        found = [
            v
            for t in sorted(by_start)
            if len(by_start[t]) >= 2 and (v := _one(model, engine, by_start[t])) is not None
        ]
        # merged per model (level), then shown without a level: it is not a load level
        out.extend(v.model_copy(update={"level": None}) for v in _merge(found))
    return out
