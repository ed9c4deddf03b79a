"""What the live view shows, derived from the telemetry rounds: latest values,
per-second rates of counters, and the most recent latency percentiles."""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field

from infersight.core.records import Sample
from infersight.monitor.history import History
from infersight.telemetry.process_tree import ProcessRow

__all__ = ["LatencyView", "MonitorState"]

#: Counters shown as per-second rates (normalised names).
RATE_COUNTERS = (
    "engine.prompt_tokens_total",
    "engine.generation_tokens_total",
    "engine.requests_total",
    "engine.requests_finished_total",
    "engine.request_errors_total",
    "engine.preemptions_total",
    "engine.prompt_seconds_total",
    "engine.generation_seconds_total",
    "engine.cost_usd_total",
    "host.net_rx_bytes_total",
    "host.net_tx_bytes_total",
)
LATENCIES = ("ttft", "itl", "tpot", "e2e", "queue_time")


@dataclass
class LatencyView:
    """Latest interval percentiles of one engine histogram and when they were seen."""

    p50: float | None = None
    p90: float | None = None
    p99: float | None = None
    mean: float | None = None
    t: float | None = None


@dataclass
class MonitorState:
    """Feed it every round (``update``); read ``value``/``rate``/``latency``."""

    #: Seconds over which counter rates are averaged (smooths 1 s jitter).
    rate_window: float = 5.0
    latest: dict[tuple[str, tuple[tuple[str, str], ...]], Sample] = field(default_factory=dict)
    rounds: int = 0
    engine: str | None = None
    scrape_failures: int = 0
    _history: dict[str, deque[tuple[float, float]]] = field(default_factory=dict)
    _hist_totals: dict[str, deque[tuple[float, float, float]]] = field(default_factory=dict)
    latencies: dict[str, LatencyView] = field(default_factory=dict)
    #: The last few minutes, one point per round (the sparklines).
    history: History = field(default_factory=History)
    #: The server process and its children, as the app read them this round.
    processes: list[ProcessRow] = field(default_factory=list)
    #: What the "busy" series measures ("GPU busy", "server CPU", "host CPU").
    busy_label: str = "busy"
    #: Logical CPUs of this host (the server's CPU share is over all of them).
    cpus: int = 1

    def update(self, samples: list[Sample]) -> None:
        self.rounds += 1
        sums: dict[str, float] = {}
        round_latest: dict[str, dict[str, float | None]] = {}
        t_round = samples[0].t if samples else time.monotonic()
        for s in samples:
            key = (s.name, tuple(sorted((k, v) for k, v in s.labels.items() if k != "source")))
            self.latest[key] = s
            if s.name.startswith("engine.") and s.labels.get("engine") not in (None, "unknown"):
                self.engine = s.labels["engine"]
            if s.name == "engine.up" and s.value == 0.0:
                self.scrape_failures += 1
            if s.name in RATE_COUNTERS and s.value is not None:
                sums[s.name] = sums.get(s.name, 0.0) + s.value
            stat = s.labels.get("stat")
            if stat is not None and s.name.endswith("_seconds"):
                round_latest.setdefault(s.name, {})[stat] = s.value
        for name, total in sums.items():
            h = self._history.setdefault(name, deque())
            h.append((t_round, total))
            while len(h) > 2 and h[0][0] < t_round - self.rate_window:
                h.popleft()
        for name, stats in round_latest.items():
            base = name.removeprefix("engine.").removesuffix("_seconds")
            view = self.latencies.setdefault(base, LatencyView())
            if stats.get("p50") is not None:
                view.p50, view.p90, view.p99 = stats.get("p50"), stats.get("p90"), stats.get("p99")
                view.t = t_round
            s_, c_ = stats.get("sum"), stats.get("count")
            if s_ is not None and c_ is not None:
                ht = self._hist_totals.setdefault(base, deque())
                ht.append((t_round, s_, c_))
                while len(ht) > 2 and ht[0][0] < t_round - self.rate_window * 6:
                    ht.popleft()
                (_, s0, c0), (_, s1, c1) = ht[0], ht[-1]
                if c1 > c0:
                    view.mean = (s1 - s0) / (c1 - c0)
        self._remember(t_round)

    def busy(self) -> float | None:
        """How busy the device is, 0..1: the GPUs' mean utilisation; without GPUs, the
        server's processes' CPU over all the host's cores; else the host's CPU."""
        gpus = [s.value for s in self.values("gpu.utilization") if s.value is not None]
        if gpus:
            self.busy_label = "GPU busy"
            return sum(gpus) / len(gpus)
        cpu = [r.cpu_percent for r in self.processes if r.cpu_percent is not None]
        if cpu:
            self.busy_label = f"server CPU (of {self.cpus} cores)"
            return sum(cpu) / (100.0 * max(1, self.cpus))
        host = self.value("host.cpu_percent", cpu="all")
        self.busy_label = "host CPU"
        return None if host is None else host / 100.0

    def _remember(self, t: float) -> None:
        h = self.history
        h.add(t, "busy", self.busy())
        for name, metric in (
            ("running", "engine.requests_running"),
            ("waiting", "engine.requests_waiting"),
            ("slots", "engine.slots"),
        ):
            h.add(t, name, self.value(metric))
        h.add(t, "tok_s", self.rate("engine.generation_tokens_total"))
        ttft = self.latencies.get("ttft")
        # a point only in rounds whose interval had requests (else a gap, not a zero)
        h.add(t, "ttft", ttft.p50 if ttft is not None and ttft.t == t else None)

    def value(self, name: str, **labels: str) -> float | None:
        """Latest value of ``name`` whose labels include ``labels`` (first match)."""
        for (n, lab), s in self.latest.items():
            if n == name and all(dict(lab).get(k) == v for k, v in labels.items()):
                return s.value
        return None

    def values(self, name: str) -> list[Sample]:
        """Every latest sample of ``name`` (one per label set)."""
        return [s for (n, _), s in self.latest.items() if n == name]

    def rate(self, name: str) -> float | None:
        """Per-second increase of a counter over the rate window (None until two
        rounds; a counter reset reads as None for one window)."""
        h = self._history.get(name)
        if not h or len(h) < 2:
            return None
        (t0, v0), (t1, v1) = h[0], h[-1]
        if t1 <= t0 or v1 < v0:
            return None
        return (v1 - v0) / (t1 - t0)
