"""Fleet diagnosis: the rules of docs/design.md section 5 per replica and per time
window, over pages of series read from a metrics store, and a fleet summary on top.

    diag = FleetDiagnoser(replicas, start=t0, end=t1, step=15, window=300)
    for page in pages:            # FleetPage, in time order; one held at a time
        diag.add_page(page)
    report = diag.finish()        # FleetReport: verdicts per replica, groups, imbalance

Pure: it is given data and never fetches. Each replica's windows are judged by the
same ``engine_signals`` and ``evaluate`` a run's are. Two facts need the whole fleet:
a window that shows no slot limit takes the one R's plateau shows in other windows of
the replica, or on a replica of the same model (such windows are judged at the end, so
the answer never depends on how the range was paged); and replicas of one model that
queue while their peers idle are named as a load imbalance. Memory holds one page, the
merged verdicts and the signals of a few windows per replica (60 to 96 with the default
window), whatever the range.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable

from infersight.core.fleet import FleetPage, FleetReport, ReplicaDiagnosis, ReplicaInfo
from infersight.core.records import RunResult
from infersight.core.verdicts import VERDICT_IDS, Verdict
from infersight.diagnose.analyze import _merge
from infersight.diagnose.context import RunContext, resolve_context
from infersight.diagnose.fleet.balance import imbalance_verdicts
from infersight.diagnose.fleet.summary import summarize
from infersight.diagnose.fleet.window import Pending, WindowRow, judge, window_signals
from infersight.diagnose.physics.hardware import Device
from infersight.diagnose.signals import SampleIndex

__all__ = ["FleetDiagnoser"]

_ORDER = {vid: i for i, vid in enumerate(VERDICT_IDS)}


class FleetDiagnoser:
    """Accumulates per-window verdicts page by page; :meth:`finish` writes the report."""

    def __init__(
        self,
        replicas: dict[str, ReplicaInfo],
        *,
        start: float,
        end: float,
        step: float,
        window: float,
        engine_slots: int | None = None,
        model: object = None,
        gpu: str | Device | None = None,
    ) -> None:
        self.replicas = replicas
        self.start, self.end, self.step = start, end, step
        self.window = max(window, step)
        self.engine_slots, self.model, self.gpu = engine_slots, model, gpu
        self.rows: dict[str, list[WindowRow]] = {rid: [] for rid in replicas}
        self.verdicts: dict[str, list[Verdict]] = {rid: [] for rid in replicas}
        #: Windows that showed no slot limit, judged at the end with the fleet's.
        self._pending: dict[str, list[Pending]] = {rid: [] for rid in replicas}
        self._own_slots: dict[str, int] = {}
        self.notes: list[str] = []
        self.pages = 0

    def _edges(self, t0: float, t1: float) -> list[tuple[float, float]]:
        k0 = math.floor((t0 - self.start) / self.window + 1e-9)
        out = []
        a = self.start + k0 * self.window
        while a < t1 - 1e-9:
            out.append((max(a, t0), min(a + self.window, t1)))
            a += self.window
        return out

    def _contexts(self, page: FleetPage) -> Iterable[tuple[str, SampleIndex, RunContext]]:
        for rid, series in page.series.items():
            info = self.replicas.get(rid)
            if info is None:
                continue
            idx = SampleIndex.from_series(series)
            run = RunResult(kind="monitor", config={"engine": {"engine": info.engine}})
            yield (
                rid,
                idx,
                resolve_context(
                    run, idx, model=self.model, gpu=self.gpu, engine_slots=self.engine_slots
                ),
            )

    def add_page(self, page: FleetPage) -> None:
        """Judge every window of ``page`` for every replica with series in it; a window
        that shows no slot limit waits for :meth:`finish` (the limit may show later)."""
        self.pages += 1
        edges = self._edges(page.start, page.end)
        for rid, idx, ctx in self._contexts(page):
            new: list[Verdict] = []
            for a, b in edges:
                found = window_signals(idx, ctx, a, b, self.step)
                if found is None:
                    continue
                if found.s.S is None:
                    self._pending[rid].append(found)
                    continue
                if found.s.plateau is not None or ctx.slots is not None:
                    self._own_slots[rid] = max(self._own_slots.get(rid, 0), round(found.s.S))
                vs, row = judge(found)
                new.extend(vs)
                self.rows[rid].append(row)
            if new:
                self.verdicts[rid] = _merge(self.verdicts[rid] + new)

    def _fallbacks(self) -> dict[str, tuple[float, str]]:
        """Each replica's slot limit for windows that show none: its own, else the one
        most replicas of the same model show."""
        out: dict[str, tuple[float, str]] = {}
        groups: dict[tuple[str, str], list[str]] = {}
        for rid, info in self.replicas.items():
            groups.setdefault((info.engine, info.model), []).append(rid)
        for (_eng, model), rids in groups.items():
            own = {r: self._own_slots[r] for r in rids if r in self._own_slots}
            if not own:
                continue
            value, _ = max(Counter(own.values()).items(), key=lambda kv: (kv[1], kv[0]))
            shown = sorted(r for r, v in own.items() if v == value)
            peer = f"slot limit {value} shown by {', '.join(shown[:3])} (same model {model})"
            for rid in rids:
                if rid in own:
                    out[rid] = (
                        float(own[rid]),
                        f"slot limit {own[rid]} shown by this replica's other windows",
                    )
                else:
                    out[rid] = (float(value), peer)
                    if self._pending[rid]:
                        self.notes.append(f"{rid}: {peer}")
        return out

    def _judge_pending(self) -> None:
        fallback = self._fallbacks()
        blind = sorted(rid for rid, p in self._pending.items() if p and rid not in fallback)
        if blind:
            self.notes.append(
                f"no slot limit known for {len(blind)} replica(s) ({', '.join(blind[:4])}"
                f"{', ...' if len(blind) > 4 else ''}): the engine exports none (vLLM) and R never "
                "held a plateau while requests waited, on them or on a replica of the same model, "
                "so under-loading cannot be judged; state it with --engine-slots N"
            )
        for rid, pending in self._pending.items():
            if not pending:
                continue
            new: list[Verdict] = []
            for p in pending:
                if rid in fallback:
                    p.s.S, p.s.S_source = fallback[rid]
                vs, row = judge(p)
                new.extend(vs)
                self.rows[rid].append(row)
            self.rows[rid].sort(key=lambda r: r.start)
            merged = sorted(
                self.verdicts[rid] + new, key=lambda v: (v.window.start, _ORDER.get(v.id, 99))
            )
            self.verdicts[rid] = _merge(merged)
            pending.clear()

    def _replica(self, rid: str) -> ReplicaDiagnosis:
        rows = self.rows[rid]
        time_by: dict[str, float] = {}
        titles: dict[str, str] = {}
        for row in rows:
            for vid, title in zip(row.ids, row.titles, strict=True):
                time_by[vid] = time_by.get(vid, 0.0) + row.seconds
                titles.setdefault(vid, title)
        problems = {k: t for k, t in time_by.items() if k != "healthy"}
        pick = problems or time_by
        main = max(pick, key=lambda k: (pick[k], -_ORDER.get(k, 99))) if pick else "healthy"
        return ReplicaDiagnosis(
            replica=self.replicas[rid],
            verdicts=self.verdicts[rid],
            main=main,
            main_title=titles.get(main, "No data"),
            stats=_stats(rows),
        )

    def finish(self) -> FleetReport:
        """Judge the windows left, judge the balance between replicas, and summarise."""
        self._judge_pending()
        replicas = [self._replica(rid) for rid in sorted(self.replicas)]
        balance = imbalance_verdicts(self.replicas, self.rows)
        report = FleetReport(
            start=self.start,
            end=self.end,
            step=self.step,
            window=self.window,
            replicas=replicas,
            balance=balance,
            notes=list(self.notes),
        )
        summarize(report, self.rows)
        return report


def _mean(xs: list[tuple[float | None, float]]) -> float | None:
    pts = [(x, w) for x, w in xs if x is not None and math.isfinite(x)]
    tot = sum(w for _, w in pts)
    return sum(x * w for x, w in pts) / tot if tot else None


def _stats(rows: list[WindowRow]) -> dict[str, float | None]:
    """Time-weighted means over the range (max for TTFT p99)."""
    out: dict[str, float | None] = {
        key: _mean([(getattr(r, key), r.seconds) for r in rows])
        for key in ("R", "Q", "S", "kv", "U", "SM", "busy")
    }
    p99 = [r.ttft_p99 for r in rows if r.ttft_p99 is not None and math.isfinite(r.ttft_p99)]
    out["ttft_p99_max"] = max(p99) if p99 else None
    out["windows"] = float(len(rows))
    return out
