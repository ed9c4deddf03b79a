"""Fleet diagnosis on pages of series (as a metrics store gives them): the same rules
per replica and window, slot limits shared by replicas of a model, the load-imbalance
verdict, the summary, and pages that do not change the answer."""

from __future__ import annotations

import numpy as np
import pytest

from infersight.core.fleet import FleetPage, FleetReport, ReplicaInfo, SeriesArrays
from infersight.diagnose import FleetDiagnoser
from infersight.diagnose.fleet.balance import classify

STEP = 5.0
T0 = 1_700_000_000.0
N = 72  # 6 minutes at 5 s
MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def _series(name: str, v: np.ndarray, **labels: str) -> SeriesArrays:
    t = T0 + STEP * np.arange(v.size)
    return SeriesArrays(name, {"engine": "vllm", **labels}, t, np.asarray(v, dtype=float))


def _replica(
    running: float,
    waiting: float,
    kv: float,
    util: float,
    sm: float,
    preempt_rate: float = 0.0,
    jitter: float = 0.0,
    seed: int = 0,
) -> list[SeriesArrays]:
    rng = np.random.default_rng(seed)
    r = np.full(N, running) + (rng.integers(0, 2, N) * jitter if jitter else 0.0)
    q = np.full(N, waiting) + (rng.integers(0, 3, N) if waiting else 0.0)
    t = STEP * np.arange(N)
    return [
        _series("engine.requests_running", r),
        _series("engine.requests_waiting", q),
        _series("engine.kv_cache_usage", np.full(N, kv)),
        _series("engine.preemptions_total", preempt_rate * t),
        _series("engine.requests_finished_total", 2.0 * t),
        _series("engine.generation_tokens_total", 400.0 * t),
        SeriesArrays("gpu.utilization", {"gpu": "GPU-1"}, T0 + t, np.full(N, util)),
        SeriesArrays("gpu.sm_activity", {"gpu": "GPU-1"}, T0 + t, np.full(N, sm)),
    ]


def _fleet() -> tuple[dict[str, ReplicaInfo], dict[str, list[SeriesArrays]]]:
    series = {
        "llm/slots": _replica(8, 12, 0.45, 0.95, 0.75),
        "llm/idle": _replica(1, 0, 0.05, 0.12, 0.06, jitter=1, seed=1),
        "llm/kvfull": _replica(5, 6, 0.96, 0.97, 0.8, preempt_rate=0.3, jitter=1, seed=2),
        "llm/illusion": _replica(6, 0, 0.3, 1.0, 0.3, jitter=1, seed=3),
    }
    replicas = {rid: ReplicaInfo(id=rid, engine="vllm", model=MODEL) for rid in series}
    return replicas, series


def _pages(series: dict[str, list[SeriesArrays]], per_page: int) -> list[FleetPage]:
    pages = []
    for k in range(0, N, per_page):
        a, b = T0 + k * STEP, T0 + min(N, k + per_page) * STEP
        sub = {
            rid: [
                SeriesArrays(
                    s.name, s.labels, s.t[(s.t >= a) & (s.t < b)], s.v[(s.t >= a) & (s.t < b)]
                )
                for s in ss
            ]
            for rid, ss in series.items()
        }
        pages.append(FleetPage(start=a, end=b, series=sub))
    return pages


def _diagnose(replicas: dict[str, ReplicaInfo], pages: list[FleetPage]) -> FleetReport:
    diag = FleetDiagnoser(replicas, start=T0, end=T0 + N * STEP, step=STEP, window=60.0)
    for page in pages:
        diag.add_page(page)
    return diag.finish()


def _run(per_page: int = N) -> object:
    replicas, series = _fleet()
    return _diagnose(replicas, _pages(series, per_page))


def test_each_replica_gets_the_rule_verdict() -> None:
    rep = _run()
    main = {rd.replica.id: rd.main for rd in rep.replicas}  # type: ignore[attr-defined]
    assert main == {
        "llm/slots": "slot_bound",
        "llm/idle": "under_loaded",
        "llm/kvfull": "kv_bound",
        "llm/illusion": "busy_illusion",
    }
    slots = next(rd for rd in rep.replicas if rd.replica.id == "llm/slots")  # type: ignore[attr-defined]
    v = slots.verdicts[0]
    assert v.window.start == T0 and v.window.end == T0 + N * STEP  # 6 windows merged into one
    assert "R stays at 8" in v.summary


def test_idle_replica_takes_the_slot_limit_its_peer_showed() -> None:
    rep = _run()
    idle = next(rd for rd in rep.replicas if rd.replica.id == "llm/idle")  # type: ignore[attr-defined]
    v = idle.verdicts[0]
    slots = next(e for e in v.evidence if e.key == "slots")
    assert slots.value == 8.0 and "llm/slots" in slots.source
    assert "1.5 of 8 slots busy" in v.summary or "of 8 slots busy" in v.summary


def test_load_imbalance_is_named_in_the_summary() -> None:
    rep = _run()
    assert [v.id for v in rep.balance] == ["load_imbalance"]  # type: ignore[attr-defined]
    b = rep.balance[0]  # type: ignore[attr-defined]
    assert b.level is None and "the router is unbalanced" in b.summary
    assert next(e.value for e in b.evidence if e.key == "model") == MODEL
    assert "llm/idle" in b.summary and "llm/slots" in b.summary
    assert b.window.end - b.window.start == pytest.approx(N * STEP)
    head = " ".join(rep.headline)  # type: ignore[attr-defined]
    assert (
        f"2 of 4 replicas of {MODEL} with room while 2 are queueing (1 KV-bound, 1 "
        "slot-bound): the router is unbalanced"
    ) in head
    groups = {g.verdict: g.replicas for g in rep.groups}  # type: ignore[attr-defined]
    assert groups["slot_bound"] == ["llm/slots"] and groups["under_loaded"] == ["llm/idle"]
    assert rep.worst[0].replica == "llm/slots"  # type: ignore[attr-defined]  # 12+ waiting


def test_pages_do_not_change_the_answer() -> None:
    one = _run(N)
    many = _run(12)  # one window per page

    def strip(r):
        return [
            (rd.replica.id, rd.main, [(v.id, v.window.start, v.window.end) for v in rd.verdicts])
            for rd in r.replicas
        ]

    assert strip(one) == strip(many)
    assert [v.summary for v in one.balance] == [v.summary for v in many.balance]  # type: ignore[attr-defined]


def _subset(*rids: str) -> object:
    replicas, series = _fleet()
    keep = {k: series[k] for k in rids}
    return _diagnose({k: replicas[k] for k in keep}, _pages(keep, N))


def test_two_queueing_replicas_are_not_an_imbalance() -> None:
    rep = _subset("llm/slots", "llm/kvfull")
    assert rep.balance == []  # type: ignore[attr-defined]
    assert "unbalanced" not in " ".join(rep.headline)  # type: ignore[attr-defined]


def test_the_issue_sentence_for_idle_and_slot_bound_peers() -> None:
    rep = _subset("llm/slots", "llm/idle")
    head = rep.headline  # type: ignore[attr-defined]
    assert head[1] == (
        f"1 of 2 replicas of {MODEL} under-loaded while 1 is slot-bound: the router is unbalanced"
    )


def test_classify_reads_the_window_verdicts() -> None:
    replicas, series = _fleet()
    diag = FleetDiagnoser(replicas, start=T0, end=T0 + N * STEP, step=STEP, window=60.0)
    for p in _pages(series, N):
        diag.add_page(p)
    diag.finish()
    kinds = {rid: {classify(r) for r in rows} for rid, rows in diag.rows.items()}
    assert kinds == {
        "llm/slots": {"queued"},
        "llm/kvfull": {"queued"},
        "llm/idle": {"idle"},
        "llm/illusion": {"idle"},
    }


def test_utilisation_spread_without_queues_is_an_imbalance() -> None:
    series = {
        "llm/hot": _replica(6, 0, 0.3, 0.97, 0.92),
        "llm/cold": _replica(6, 0, 0.3, 0.35, 0.2),
    }
    replicas = {rid: ReplicaInfo(id=rid, engine="vllm", model=MODEL) for rid in series}
    rep = _diagnose(replicas, _pages(series, N))
    assert [v.id for v in rep.balance] == ["load_imbalance"]
    summary = rep.balance[0].summary
    assert summary.startswith("Device busy ranges from 20% (llm/cold) to 92% (llm/hot)")
    spread = next(e for e in rep.balance[0].evidence if e.key == "busy_spread")
    assert spread.value == pytest.approx(0.72)
    # equal load is no imbalance
    even = {"llm/a": _replica(6, 0, 0.3, 0.9, 0.8), "llm/b": _replica(6, 0, 0.3, 0.85, 0.7, seed=5)}
    rep = _diagnose(
        {r: ReplicaInfo(id=r, engine="vllm", model=MODEL) for r in even}, _pages(even, N)
    )
    assert rep.balance == []
