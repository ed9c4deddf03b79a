"""Which replicas the store holds and which series belong to each.

A replica is one engine server: its series carry a ``pod`` (with ``namespace``) when
Prometheus discovered it in Kubernetes, else an ``instance``. GPU series join the
replica that uses the GPU: by dcgm-exporter's pod mapping (``exported_pod`` /
``pod``), else by host (dcgm's ``Hostname`` against the replica's node or instance
host) when exactly one replica runs there. infersight's own exporter joins the engine
it scrapes (its ``source`` URL is that engine's ``instance``), so an engine scraped
both directly and through the exporter is one replica.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlsplit

from infersight.core.engines import engine_specs
from infersight.core.fleet import ReplicaInfo
from infersight.telemetry.prometheus.catalog import GpuExporterSpec, Signal

__all__ = ["Inventory", "build_inventory"]

_HOST_LABELS = ("node", "kubernetes_node", "nodename", "hostname", "Hostname", "host")
Key = tuple[str, ...]


def _key(labels: dict[str, str]) -> Key:
    if labels.get("pod"):
        return ("pod", labels.get("namespace", ""), labels["pod"])
    return ("instance", labels.get("instance") or labels.get("job", ""))


def _rid(key: Key) -> str:
    if key[0] == "pod":
        return f"{key[1]}/{key[2]}" if key[1] else key[2]
    return key[1]


def _host(labels: dict[str, str]) -> str:
    for k in _HOST_LABELS:
        if labels.get(k):
            return labels[k]
    inst = labels.get("instance", "")
    return (urlsplit(f"//{inst}").hostname or "") if inst else ""


def _short(host: str) -> str:
    return host.split(".")[0].lower()


def _netloc(url: str) -> str:
    parts = urlsplit(url)
    return parts.netloc.rsplit("@", 1)[-1]


@dataclass(slots=True)
class Inventory:
    """Replicas and the maps from a series' labels to its replica."""

    replicas: dict[str, ReplicaInfo] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    engine_alias: dict[Key, str] = field(default_factory=dict)
    exporter_alias: dict[tuple[Key, str], str] = field(default_factory=dict)
    exporter_rids: dict[Key, list[str]] = field(default_factory=dict)
    gpu_owner: dict[str, str] = field(default_factory=dict)
    #: (engine key, name, stat) the engine's own series provide: the exporter's copy of
    #: them is dropped for replicas scraped directly too (``scraped``).
    direct: set[tuple[str, str, str]] = field(default_factory=set)
    scraped: set[str] = field(default_factory=set)
    gpu_spec: GpuExporterSpec | None = None

    def gpu_id(self, labels: dict[str, str]) -> str:
        spec = self.gpu_spec
        for lab in spec.gpu_labels if spec else ("UUID", "uuid"):
            if labels.get(lab) and lab not in ("gpu",):
                return labels[lab]
        host = _host({k: v for k, v in labels.items() if k != "instance"}) or labels.get(
            "instance", ""
        )
        return f"{host}/{labels.get('gpu', '?')}"

    def replica_of(self, sig: Signal, labels: dict[str, str]) -> tuple[str, dict[str, str]] | None:
        """The replica a result series belongs to and the labels its normalised series
        carries, or None (not a selected replica, or a duplicate of the engine's own)."""
        if sig.family == "engine":
            rid = self.engine_alias.get((sig.source, *_key(labels)))
            if rid is None:
                return None
            out = {"engine": sig.source}
        elif sig.family == "exporter":
            found = self._exporter_replica(labels)
            if found is None:
                return None
            rid, engine = found
            if (
                rid in self.scraped
                and (self.replicas[rid].engine, sig.name, sig.stat) in self.direct
            ):
                return None  # the engine's own series say the same, at the source
            out = {"engine": engine, **dict(sig.labels)}
        else:
            if sig.source == "exporter":
                rids = self.exporter_rids.get(_key(labels), [])
                if len(rids) != 1:
                    return None
                rid, gid = rids[0], f"{_rid(_key(labels))}/{labels.get('gpu', '?')}"
            else:
                gid = self.gpu_id(labels)
                owner = self.gpu_owner.get(gid)
                if owner is None:
                    return None
                rid = owner
            out = {"gpu": gid, "via": sig.source}
        if sig.stat:
            out["stat"] = sig.stat
        return rid, out

    def _exporter_replica(self, labels: dict[str, str]) -> tuple[str, str] | None:
        src = labels.get("source")
        if src is not None:
            rid = self.exporter_alias.get((_key(labels), src))
            return (rid, self.replicas[rid].engine) if rid else None
        rids = self.exporter_rids.get(_key(labels), [])  # process series: no source label
        return (rids[0], self.replicas[rids[0]].engine) if len(rids) == 1 else None


def _replica(rid: str, engine: str, lab: dict[str, str], sources: list[str]) -> ReplicaInfo:
    """A replica first seen in one series, named from its labels."""
    return ReplicaInfo(
        id=rid,
        engine=engine,
        model=lab.get("model_name") or lab.get("job", ""),
        job=lab.get("job", ""),
        instance=lab.get("instance", ""),
        namespace=lab.get("namespace", ""),
        pod=lab.get("pod", ""),
        host=_host(lab),
        sources=sources,
    )


def _add_engines(inv: Inventory, engine_sets: dict[str, list[dict[str, str]]]) -> None:
    specs = engine_specs()
    for eng, sets in engine_sets.items():
        label = specs[eng].label if eng in specs else eng
        for lab in sets:
            key = _key(lab)
            rid = _rid(key)
            if rid in inv.replicas and inv.replicas[rid].engine != eng:
                rid = f"{rid} ({eng})"
            inv.engine_alias[(eng, *key)] = rid
            inv.scraped.add(rid)
            if rid not in inv.replicas:
                inv.replicas[rid] = _replica(rid, eng, lab, [f"{label} /metrics"])


def _add_exporter(inv: Inventory, sets: list[dict[str, str]]) -> None:
    by_instance: dict[str, list[dict[str, str]]] = {}
    for lab in sets:
        by_instance.setdefault(_rid(_key(lab)), []).append(lab)
    direct = {r.instance: rid for rid, r in inv.replicas.items() if r.instance}
    for base, labs in by_instance.items():
        for lab in labs:
            src = lab.get("source", "")
            rid = direct.get(_netloc(src))
            if rid is None:
                rid = base if len(labs) == 1 else f"{base} {_netloc(src) or src}"
                if rid not in inv.replicas:
                    inv.replicas[rid] = _replica(rid, lab.get("engine", "unknown"), lab, [])
            if "infersight exporter" not in inv.replicas[rid].sources:
                inv.replicas[rid].sources.append("infersight exporter")
            inv.exporter_alias[(_key(lab), src)] = rid
            rids = inv.exporter_rids.setdefault(_key(lab), [])
            if rid not in rids:
                rids.append(rid)


def _attach(r: ReplicaInfo, gid: str, how: str, source: str) -> None:
    r.gpus.append(gid)
    r.gpu_join = r.gpu_join or how
    if source not in r.sources:
        r.sources.append(source)


def _join_gpu(
    inv: Inventory, lab: dict[str, str], spec: GpuExporterSpec, unplaced: dict[str, int]
) -> None:
    gid = inv.gpu_id(lab)
    if gid in inv.gpu_owner:
        return
    for pod_label, ns_label in spec.pod_labels:
        pod, ns = lab.get(pod_label, ""), lab.get(ns_label, "")
        if not pod:
            continue
        for rid, r in inv.replicas.items():
            if r.pod == pod and (not ns or not r.namespace or ns == r.namespace):
                inv.gpu_owner[gid] = rid
                _attach(r, gid, "pod", spec.label)
                return
    host = next((lab[h] for h in spec.host_labels if lab.get(h)), "")
    on_host = [rid for rid, r in inv.replicas.items() if host and _short(r.host) == _short(host)]
    if len(on_host) == 1:
        inv.gpu_owner[gid] = on_host[0]
        _attach(inv.replicas[on_host[0]], gid, "host", spec.label)
    elif len(on_host) > 1:
        unplaced[host] = unplaced.get(host, 0) + 1


def build_inventory(
    engine_sets: dict[str, list[dict[str, str]]],
    exporter_sets: list[dict[str, str]],
    gpu_sets: list[dict[str, str]],
    exporter_gpu_sets: list[dict[str, str]],
    gpu_spec: GpuExporterSpec,
) -> Inventory:
    """Replicas from the label sets of each engine's anchor series (``engine_sets``:
    engines.toml key -> label sets), the exporter's, and the GPUs joined to them."""
    inv = Inventory(gpu_spec=gpu_spec)
    _add_engines(inv, engine_sets)
    _add_exporter(inv, exporter_sets)
    unplaced: dict[str, int] = {}
    for lab in gpu_sets:
        _join_gpu(inv, lab, gpu_spec, unplaced)
    for lab in exporter_gpu_sets:
        rids = inv.exporter_rids.get(_key(lab), [])
        if len(rids) == 1:
            r = inv.replicas[rids[0]]
            gid = f"{_rid(_key(lab))}/{lab.get('gpu', '?')}"
            if gid not in r.gpus:
                _attach(r, gid, "instance", "infersight exporter")
    for host, n in sorted(unplaced.items()):
        inv.notes.append(
            f"{n} GPU(s) on host {host} not joined to a replica: several replicas run "
            "there and dcgm-exporter has no pod label (enable its Kubernetes pod mapping)"
        )
    placed = len(inv.gpu_owner)
    if gpu_sets and not placed:
        inv.notes.append(
            f"{len({inv.gpu_id(g) for g in gpu_sets})} GPU(s) in dcgm-exporter's series "
            "match no replica (by pod or host)"
        )
    for r in inv.replicas.values():
        r.gpus.sort()
    return inv
