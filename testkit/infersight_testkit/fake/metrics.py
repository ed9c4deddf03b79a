"""The fake server's ``/metrics`` in a real engine's dialect (``vllm`` V1, ``sglang``,
``tgi``, ``llamacpp``; the families themselves are in :mod:`.dialects`).

The names, types, labels and bucket bounds are the engines' own, so infersight's
scraper, name map (``data/telemetry/engines.toml``), exporter, dashboard and diagnosis
see what they would see in production. The counters follow what the fake really did:
every generation request it answered (tokens, times, finish reason), every scripted
error (TGI counts those by kind) and every client that left before its answer (an
abort). Running is the number of requests holding a slot, waiting the rest (FIFO
queue). Current llama.cpp builds export no KV usage, so neither does that dialect.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from prometheus_client.core import Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector, CollectorRegistry

from infersight.core.errors import ConfigError
from infersight_testkit.fake.config import FakeConfig
from infersight_testkit.fake.dialects import BOUNDS, DIALECTS, families
from infersight_testkit.fake.slots import SlotPool

__all__ = ["DIALECTS", "EngineMetrics"]

#: KV-cache size in tokens the SGLang dialect reports usage against.
_KV_TOKENS = 65536


@dataclass(slots=True)
class _Hist:
    bounds: Sequence[float]
    counts: list[float] = field(default_factory=list)
    total: float = 0.0
    n: float = 0.0

    def observe(self, value: float, weight: float = 1.0) -> None:
        if not self.counts:
            self.counts = [0.0] * (len(self.bounds) + 1)
        self.counts[bisect.bisect_left(self.bounds, value)] += weight
        self.total += value * weight
        self.n += weight


class EngineMetrics(Collector):
    """Counters of the fake engine and their exposition in one dialect."""

    def __init__(self, config: FakeConfig, pool: SlotPool) -> None:
        if config.metrics_dialect not in DIALECTS:
            raise ConfigError(
                f"unknown metrics dialect {config.metrics_dialect!r}; "
                f"choose one of {', '.join(DIALECTS)}"
            )
        self.dialect = config.metrics_dialect
        self.config = config
        self.pool = pool
        self.kv_tokens = config.kv_capacity or _KV_TOKENS
        self.received = 0.0
        self.prompt_tokens = 0.0
        self.generation_tokens = 0.0
        self.finished: dict[str, float] = {}
        self.failed: dict[str, float] = {}
        self.aborted = 0.0
        self.prompt_seconds = 0.0
        self.gen_seconds = 0.0
        self.hists = {kind: _Hist(b) for kind, b in BOUNDS[self.dialect].items()}
        self._started = time.monotonic()
        self._registry = CollectorRegistry(auto_describe=False)
        self._registry.register(self)

    @property
    def waiting(self) -> int:
        """The queue the fake reports: none when it hides its queue (``hide_waiting``)."""
        return 0 if self.config.hide_waiting else self.pool.waiting

    def kv_usage(self) -> float:
        """The KV-cache usage the fake reports (0..1)."""
        if self.config.kv_capacity:
            return self.pool.kv_usage()
        per = self.config.kv_per_running
        if per is not None:
            return min(1.0, per * self.pool.running)
        return self.config.kv_usage

    def generation_rate(self) -> float:
        """Tokens generated per second since the server started."""
        return self.generation_tokens / max(1e-9, time.monotonic() - self._started)

    def completed(self) -> float:
        """Generations that ran to their end (not aborted)."""
        return sum(n for reason, n in self.finished.items() if reason != "abort")

    def _observe(self, kind: str, value: float, weight: float = 1.0) -> None:
        h = self.hists.get(kind)
        if h is not None:
            h.observe(value, weight)

    def arrived(self) -> None:
        """A generation request arrived (TGI counts every one, failures included)."""
        self.received += 1

    def failed_with(self, status: int) -> None:
        """A generation request ended in an HTTP error, counted by TGI's error kinds."""
        kind = (
            "overloaded" if status in (429, 503) else "validation" if status < 500 else "generation"
        )
        self.failed[kind] = self.failed.get(kind, 0.0) + 1

    def abort(self) -> None:
        """The client left before its answer was done."""
        self.aborted += 1
        self.finished["abort"] = self.finished.get("abort", 0.0) + 1

    def observe(
        self,
        *,
        queue: float,
        ttft: float,
        itl: float,
        e2e: float,
        prompt: int,
        tokens: int,
        finish: str,
    ) -> None:
        """One finished generation: its times in seconds and its token counts."""
        self.prompt_tokens += prompt
        self.generation_tokens += tokens
        self.finished[finish] = self.finished.get(finish, 0.0) + 1
        self.prompt_seconds += max(0.0, ttft - queue)
        self.gen_seconds += max(0.0, e2e - ttft)
        self._observe("ttft", ttft)
        if tokens > 1:
            self._observe("itl", itl, tokens - 1)
            self._observe("tpot", (e2e - ttft) / (tokens - 1))
        self._observe("e2e", e2e)
        self._observe("queue", queue)
        self._observe("prefill", max(0.0, ttft - queue))
        self._observe("decode", max(0.0, e2e - ttft))
        self._observe("inference", max(0.0, e2e - queue))
        self._observe("prompt_len", prompt)
        self._observe("gen_len", tokens)

    def render(self) -> bytes:
        """The ``/metrics`` body (Prometheus text format 0.0.4)."""
        body: bytes = generate_latest(self._registry)
        if self.dialect == "tgi":
            # TGI's Rust exporter adds no _total to counters (and no TGI name has it).
            body = body.replace(b"_total", b"")
        return body

    def collect(self) -> Iterator[Metric]:
        return families(self)
