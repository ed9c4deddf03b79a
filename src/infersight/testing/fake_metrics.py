"""The fake server's ``/metrics`` in a real engine's dialect.

The names, types and labels are the engines' own, so infersight's scraper, name map
(``data/telemetry/engines.toml``) and diagnosis see what they would see in production:

- ``vllm`` (the V1 engine): ``vllm:num_requests_running`` / ``_waiting``,
  ``vllm:kv_cache_usage_perc`` (0..1), ``vllm:num_preemptions_total``, token and
  request counters, and the TTFT / inter-token / e2e / queue-time histograms, labelled
  ``model_name`` and ``engine`` as vLLM labels them. vLLM exports no slot limit.
- ``llamacpp`` (``llama-server --metrics``): ``llamacpp:requests_processing`` /
  ``_deferred``, token and time counters, ``n_decode_total`` and
  ``n_busy_slots_per_decode``. Current builds export no KV usage, so neither does this.

Running is the number of requests holding a slot, waiting the rest (FIFO queue).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector, CollectorRegistry

from infersight.core.errors import ConfigError
from infersight.testing.fake_config import FakeConfig
from infersight.testing.fake_slots import SlotPool

__all__ = ["DIALECTS", "EngineMetrics"]

DIALECTS = ("vllm", "llamacpp")

# vLLM V1's bucket bounds (vllm/v1/metrics/loggers.py), seconds.
# fmt: off
_TTFT_BOUNDS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
                2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
_ITL_BOUNDS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5,
               5.0, 7.5, 10.0, 20.0, 40.0, 80.0)
_E2E_BOUNDS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0,
               60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)
# fmt: on


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

    def family(self, name: str, doc: str, labels: dict[str, str]) -> HistogramMetricFamily:
        fam = HistogramMetricFamily(name, doc, labels=list(labels))
        cum, buckets = 0.0, []
        counts = self.counts or [0.0] * (len(self.bounds) + 1)
        for bound, c in zip([*map(str, self.bounds), "+Inf"], counts, strict=True):
            cum += c
            buckets.append((bound, cum))
        fam.add_metric(list(labels.values()), buckets, self.total)
        return fam


class EngineMetrics(Collector):
    """Counters of the fake engine and their exposition in one dialect."""

    def __init__(self, config: FakeConfig, pool: SlotPool) -> None:
        if config.metrics_dialect not in DIALECTS:
            raise ConfigError(f"unknown metrics dialect {config.metrics_dialect!r}")
        self.dialect = config.metrics_dialect
        self.config = config
        self.pool = pool
        self.prompt_tokens = 0.0
        self.generation_tokens = 0.0
        self.finished: dict[str, float] = {}
        self.prompt_seconds = 0.0
        self.gen_seconds = 0.0
        self.ttft = _Hist(_TTFT_BOUNDS)
        self.itl = _Hist(_ITL_BOUNDS)
        self.e2e = _Hist(_E2E_BOUNDS)
        self.queue = _Hist(_E2E_BOUNDS)
        self._registry = CollectorRegistry(auto_describe=False)
        self._registry.register(self)

    def kv_usage(self) -> float:
        """The KV-cache usage the fake reports (0..1)."""
        per = self.config.kv_per_running
        if per is not None:
            return min(1.0, per * self.pool.running)
        return self.config.kv_usage

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
        self.ttft.observe(ttft)
        if tokens > 1:
            self.itl.observe(itl, tokens - 1)
        self.e2e.observe(e2e)
        self.queue.observe(queue)

    def render(self) -> bytes:
        """The ``/metrics`` body (Prometheus text format 0.0.4)."""
        return generate_latest(self._registry)

    def collect(self) -> Iterator[Metric]:
        if self.dialect == "vllm":
            yield from self._vllm()
        else:
            yield from self._llamacpp()

    def _vllm(self) -> Iterator[Metric]:
        lab = {"model_name": self.config.model, "engine": "0"}
        keys, vals = list(lab), list(lab.values())

        def gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
            g = GaugeMetricFamily(name, doc, labels=keys)
            g.add_metric(vals, value)
            return g

        def counter(name: str, doc: str, value: float) -> CounterMetricFamily:
            c = CounterMetricFamily(name, doc, labels=keys)
            c.add_metric(vals, value)
            return c

        pool = self.pool
        yield gauge(
            "vllm:num_requests_running",
            "Number of requests in model execution batches.",
            pool.running,
        )
        yield gauge(
            "vllm:num_requests_waiting", "Number of requests waiting to be processed.", pool.waiting
        )
        yield gauge(
            "vllm:kv_cache_usage_perc",
            "KV-cache usage. 1 means 100 percent usage.",
            self.kv_usage(),
        )
        yield counter(
            "vllm:num_preemptions", "Cumulative number of preemption from the engine.", 0.0
        )
        yield counter(
            "vllm:prompt_tokens", "Number of prefill tokens processed.", self.prompt_tokens
        )
        yield counter(
            "vllm:generation_tokens",
            "Number of generation tokens processed.",
            self.generation_tokens,
        )
        ok = CounterMetricFamily(
            "vllm:request_success",
            "Count of successfully processed requests.",
            labels=[*keys, "finished_reason"],
        )
        for reason in ("stop", "length", "abort"):
            ok.add_metric([*vals, reason], self.finished.get(reason, 0.0))
        yield ok
        yield self.ttft.family(
            "vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", lab
        )
        yield self.itl.family(
            "vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", lab
        )
        yield self.e2e.family(
            "vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", lab
        )
        yield self.queue.family(
            "vllm:request_queue_time_seconds",
            "Histogram of time spent in WAITING phase for request.",
            lab,
        )

    def _llamacpp(self) -> Iterator[Metric]:
        pool = self.pool
        itl = self.config.itl
        # llama.cpp runs one decode step per inter-token interval while any slot is busy.
        decodes = pool.busy_seconds() / itl if itl > 0 else self.generation_tokens
        per_decode = self.generation_tokens / decodes if decodes else 0.0
        yield CounterMetricFamily(
            "llamacpp:prompt_tokens_total",
            "Number of prompt tokens processed.",
            value=self.prompt_tokens,
        )
        yield CounterMetricFamily(
            "llamacpp:prompt_seconds_total", "Prompt process time", value=self.prompt_seconds
        )
        yield CounterMetricFamily(
            "llamacpp:tokens_predicted_total",
            "Number of generation tokens processed.",
            value=self.generation_tokens,
        )
        yield CounterMetricFamily(
            "llamacpp:tokens_predicted_seconds_total",
            "Predict process time",
            value=self.gen_seconds,
        )
        yield CounterMetricFamily(
            "llamacpp:n_decode_total", "Total number of llama_decode() calls", value=decodes
        )
        yield GaugeMetricFamily(
            "llamacpp:n_busy_slots_per_decode",
            "Average number of busy slots per llama_decode() call",
            value=per_decode,
        )
        yield GaugeMetricFamily(
            "llamacpp:requests_processing", "Number of requests processing.", value=pool.running
        )
        yield GaugeMetricFamily(
            "llamacpp:requests_deferred", "Number of requests deferred.", value=pool.waiting
        )
