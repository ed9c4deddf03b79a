"""The fake engine's ``/metrics`` in each real engine's own names, types, labels and
bucket bounds. Every name served is one the engine table (``data/telemetry/engines.toml``)
maps, and every name it maps for a current release is served (a test checks both), so a
dashboard or alert fed by the fake sees what it would see in production.

Sources: vLLM ``vllm/v1/metrics/loggers.py`` (V1 engine); SGLang
``python/sglang/srt/metrics/collector.py`` (bucket bounds of TokenizerMetricsCollector and
the scheduler's queue-time histogram); TGI ``router/src/server.rs`` (35 duration buckets
0.0001 * 1.5^k, 100 linear length buckets up to --max-input-tokens / --max-total-tokens) and
``docs/source/reference/metrics.md``; llama.cpp ``tools/server`` ``/metrics``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

if TYPE_CHECKING:
    from infersight_testkit.fake.config import FakeConfig
    from infersight_testkit.fake.slots import SlotPool

__all__ = ["BOUNDS", "DIALECTS", "families"]


class Hist(Protocol):
    """One histogram's bucket counts (``counts[i]`` below ``bounds[i]``, the last one
    above every bound) and the sum of the values."""

    @property
    def bounds(self) -> Sequence[float]: ...
    @property
    def counts(self) -> list[float]: ...
    @property
    def total(self) -> float: ...


class EngineCounters(Protocol):
    """What a dialect reads of the fake engine's counters: a
    :class:`infersight_testkit.fake.metrics.EngineMetrics` (a protocol here, so that the
    two modules do not import each other)."""

    @property
    def dialect(self) -> str: ...
    @property
    def config(self) -> FakeConfig: ...
    @property
    def pool(self) -> SlotPool: ...
    @property
    def kv_tokens(self) -> int: ...
    @property
    def received(self) -> float: ...
    @property
    def prompt_tokens(self) -> float: ...
    @property
    def generation_tokens(self) -> float: ...
    @property
    def finished(self) -> dict[str, float]: ...
    @property
    def failed(self) -> dict[str, float]: ...
    @property
    def aborted(self) -> float: ...
    @property
    def prompt_seconds(self) -> float: ...
    @property
    def gen_seconds(self) -> float: ...
    @property
    def hists(self) -> Mapping[str, Hist]: ...
    @property
    def waiting(self) -> int: ...

    def kv_usage(self) -> float: ...
    def generation_rate(self) -> float: ...
    def completed(self) -> float: ...


# fmt: off
_VLLM_TTFT = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
              2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
_VLLM_ITL = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5,
             5.0, 7.5, 10.0, 20.0, 40.0, 80.0)
_VLLM_REQ = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0,
             60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)
_SGL_TTFT = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400)
_SGL_E2E = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400,
            600, 1200, 1800, 2400)
_SGL_ITL = (0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040,
            0.060, 0.080, 0.100, 0.200, 0.400, 0.600, 0.800, 1.0, 2.0, 4.0, 6.0, 8.0)
_SGL_QUEUE = (0.0, 0.1, 0.2, 0.5, 1, 2, 3, 4, 5, 10, 15, 20, 30, 40, 50, 60, 70, 80, 90,
              100, 200, 300, 400, 500, 600, 700, 800, 900, 1000, 1200, 1400, 1600, 1800,
              2000, 2500, 3000)
# fmt: on
_TGI_DURATION = tuple(0.0001 * 1.5**k for k in range(1, 36))
_TGI_MAX_INPUT, _TGI_MAX_TOTAL = 4096, 8192
_TGI_INPUT = tuple(_TGI_MAX_INPUT / 100 * (x + 1) for x in range(100))
_TGI_GENERATED = tuple(_TGI_MAX_TOTAL / 100 * (x + 1) for x in range(100))

#: Dialect -> histogram kind -> bucket bounds (the kinds EngineMetrics.observe fills).
BOUNDS: dict[str, dict[str, Sequence[float]]] = {
    "vllm": {
        "ttft": _VLLM_TTFT,
        "itl": _VLLM_ITL,
        "tpot": _VLLM_ITL,
        "e2e": _VLLM_REQ,
        "queue": _VLLM_REQ,
        "prefill": _VLLM_REQ,
        "decode": _VLLM_REQ,
        "inference": _VLLM_REQ,
    },
    "sglang": {"ttft": _SGL_TTFT, "itl": _SGL_ITL, "e2e": _SGL_E2E, "queue": _SGL_QUEUE},
    "tgi": {
        "queue": _TGI_DURATION,
        "e2e": _TGI_DURATION,
        "tpot": _TGI_DURATION,
        "inference": _TGI_DURATION,
        "prompt_len": _TGI_INPUT,
        "gen_len": _TGI_GENERATED,
    },
    "llamacpp": {},
}


#: (name, help, kind of EngineMetrics.hists) of each dialect's histograms.
_VLLM_HISTS = (
    ("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", "ttft"),
    ("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", "itl"),
    (
        "vllm:request_time_per_output_token_seconds",
        "Histogram of time_per_output_token_seconds per request.",
        "tpot",
    ),
    ("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", "e2e"),
    (
        "vllm:request_queue_time_seconds",
        "Histogram of time spent in WAITING phase for request.",
        "queue",
    ),
    (
        "vllm:request_prefill_time_seconds",
        "Histogram of time spent in PREFILL phase for request.",
        "prefill",
    ),
    (
        "vllm:request_decode_time_seconds",
        "Histogram of time spent in DECODE phase for request.",
        "decode",
    ),
    (
        "vllm:request_inference_time_seconds",
        "Histogram of time spent in RUNNING phase for request.",
        "inference",
    ),
)
_SGLANG_HISTS = (
    ("sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds.", "ttft"),
    ("sglang:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", "itl"),
    (
        "sglang:e2e_request_latency_seconds",
        "Histogram of End-to-end request latency in seconds",
        "e2e",
    ),
    ("sglang:queue_time_seconds", "Histogram of queueing time in seconds.", "queue"),
)
_TGI_HISTS = (
    ("tgi_request_queue_duration", "Time spent in the queue per request", "queue"),
    ("tgi_request_duration", "End-to-end generate request latency", "e2e"),
    ("tgi_request_mean_time_per_token_duration", "Mean time per token per request", "tpot"),
    ("tgi_request_inference_duration", "Request inference duration", "inference"),
    ("tgi_request_input_length", "Input token length per request", "prompt_len"),
    ("tgi_request_generated_tokens", "Generated tokens per request", "gen_len"),
)


class _Families:
    """Builds families that all carry the same constant labels."""

    def __init__(self, m: EngineCounters, labels: dict[str, str]) -> None:
        self.m = m
        self.keys = list(labels)
        self.vals = list(labels.values())

    def gauge(self, name: str, doc: str, value: float) -> GaugeMetricFamily:
        g = GaugeMetricFamily(name, doc, labels=self.keys)
        g.add_metric(self.vals, value)
        return g

    def counter(self, name: str, doc: str, value: float) -> CounterMetricFamily:
        c = CounterMetricFamily(name, doc, labels=self.keys)
        c.add_metric(self.vals, value)
        return c

    def by_label(
        self, name: str, doc: str, label: str, values: dict[str, float]
    ) -> CounterMetricFamily:
        """A counter with one more label (a finish reason, an error kind)."""
        c = CounterMetricFamily(name, doc, labels=[*self.keys, label])
        for v, n in sorted(values.items()):
            c.add_metric([*self.vals, v], n)
        return c

    def hists(self, table: Sequence[tuple[str, str, str]]) -> Iterator[HistogramMetricFamily]:
        for name, doc, kind in table:
            yield self.hist(name, doc, kind)

    def hist(self, name: str, doc: str, kind: str) -> HistogramMetricFamily:
        h = self.m.hists[kind]
        fam = HistogramMetricFamily(name, doc, labels=self.keys)
        cum, buckets = 0.0, []
        counts = h.counts or [0.0] * (len(h.bounds) + 1)
        for bound, c in zip([*map(repr, map(float, h.bounds)), "+Inf"], counts, strict=True):
            cum += c
            buckets.append((bound, cum))
        fam.add_metric(self.vals, buckets, h.total)
        return fam


def _vllm(m: EngineCounters) -> Iterator[Metric]:
    f = _Families(m, {"model_name": m.config.model, "engine": "0"})
    pool = m.pool
    yield f.gauge(
        "vllm:num_requests_running", "Number of requests in model execution batches.", pool.running
    )
    yield f.gauge(
        "vllm:num_requests_waiting", "Number of requests waiting to be processed.", m.waiting
    )
    yield f.gauge(
        "vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", m.kv_usage()
    )
    waiting = GaugeMetricFamily(
        "vllm:num_requests_waiting_by_reason",
        "Number of requests waiting, by reason.",
        labels=[*f.keys, "reason"],
    )
    waiting.add_metric([*f.vals, "capacity"], m.waiting)
    waiting.add_metric([*f.vals, "deferred"], 0.0)
    yield waiting
    yield f.counter(
        "vllm:num_preemptions",
        "Cumulative number of preemption from the engine.",
        float(pool.preemptions),
    )
    if pool.kv_capacity:
        # vLLM's cache configuration as an info gauge (its value is 1; the numbers are in
        # its labels): the fake counts its KV in tokens, one block a token. Only a fake
        # with a KV capacity has one to export (its usage is not made up).
        cap = str(pool.kv_capacity)
        info = GaugeMetricFamily(
            "vllm:cache_config_info",
            "Information of the LLMEngine CacheConfig",
            labels=[*f.keys, "block_size", "num_gpu_blocks", "kv_cache_size_tokens"],
        )
        info.add_metric([*f.vals, "1", cap, cap], 1.0)
        yield info
    yield f.counter("vllm:prompt_tokens", "Number of prefill tokens processed.", m.prompt_tokens)
    yield f.counter(
        "vllm:generation_tokens", "Number of generation tokens processed.", m.generation_tokens
    )
    yield f.counter(
        "vllm:prefix_cache_queries",
        "Prefix cache queries, in terms of number of queried tokens.",
        m.prompt_tokens,
    )
    yield f.counter(
        "vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.", 0.0
    )
    reasons = {r: m.finished.get(r, 0.0) for r in ("stop", "length", "abort")}
    yield f.by_label(
        "vllm:request_success",
        "Count of successfully processed requests.",
        "finished_reason",
        reasons,
    )
    yield from f.hists(_VLLM_HISTS)


def _sglang(m: EngineCounters) -> Iterator[Metric]:
    f = _Families(m, {"model_name": m.config.model})
    pool = m.pool
    usage = m.kv_usage()
    yield f.gauge("sglang:num_running_reqs", "The number of running requests.", pool.running)
    yield f.gauge(
        "sglang:num_queue_reqs", "The number of requests in the waiting queue.", m.waiting
    )
    yield f.gauge("sglang:token_usage", "The token usage.", usage)
    yield f.gauge(
        "sglang:num_used_tokens", "The number of used tokens.", round(usage * m.kv_tokens)
    )
    yield f.gauge("sglang:num_retracted_reqs", "The number of retracted requests.", 0.0)
    yield f.gauge("sglang:cache_hit_rate", "The prefix cache hit rate.", 0.0)
    yield f.gauge(
        "sglang:gen_throughput", "The generation throughput (token/s).", m.generation_rate()
    )
    yield f.counter("sglang:num_retracted_requests", "Total number of retracted requests.", 0.0)
    yield f.counter("sglang:prompt_tokens", "Number of prefill tokens processed.", m.prompt_tokens)
    yield f.counter(
        "sglang:generation_tokens", "Number of generation tokens processed.", m.generation_tokens
    )
    yield f.counter("sglang:cached_tokens", "Number of cached prompt tokens.", 0.0)
    yield f.counter("sglang:num_requests", "Number of requests processed.", m.completed())
    yield f.counter("sglang:num_aborted_requests", "Number of requests aborted.", m.aborted)
    yield from f.hists(_SGLANG_HISTS)


def _tgi(m: EngineCounters) -> Iterator[Metric]:
    # TGI labels only the failures (by error kind).
    f = _Families(m, {})
    pool = m.pool
    yield f.gauge("tgi_batch_current_size", "Current batch size", pool.running)
    yield f.gauge("tgi_queue_size", "Current queue size", m.waiting)
    yield f.gauge("tgi_batch_current_max_tokens", "Maximum tokens for the current batch", 16000.0)
    # prometheus_client adds _total to counters; EngineMetrics.render takes it off again.
    yield f.counter("tgi_request_count", "Total number of requests", m.received)
    yield f.counter("tgi_request_success", "Number of successful requests", m.completed())
    yield f.by_label("tgi_request_failure", "Number of failed requests", "err", m.failed)
    yield from f.hists(_TGI_HISTS)


def _llamacpp(m: EngineCounters) -> Iterator[Metric]:
    pool = m.pool
    itl = m.config.itl
    # llama.cpp runs one decode step per inter-token interval while any slot is busy.
    decodes = pool.busy_seconds() / itl if itl > 0 else m.generation_tokens
    per_decode = m.generation_tokens / decodes if decodes else 0.0
    c, g = CounterMetricFamily, GaugeMetricFamily
    yield c(
        "llamacpp:prompt_tokens_total",
        "Number of prompt tokens processed, excluding cached tokens",
        value=m.prompt_tokens,
    )
    yield c(
        "llamacpp:prompt_tokens_cached_total",
        "Number of prompt tokens reused from the cache",
        value=0.0,
    )
    yield c(
        "llamacpp:prompt_seconds_total",
        "Total time spent processing prompts",
        value=m.prompt_seconds,
    )
    yield c(
        "llamacpp:tokens_predicted_total",
        "Number of generation tokens processed",
        value=m.generation_tokens,
    )
    yield c(
        "llamacpp:tokens_predicted_seconds_total",
        "Total time spent generating tokens",
        value=m.gen_seconds,
    )
    yield c("llamacpp:n_decode_total", "Total number of llama_decode() calls", value=decodes)
    yield g(
        "llamacpp:n_busy_slots_per_decode",
        "Average number of busy slots per llama_decode() call",
        value=per_decode,
    )
    yield g("llamacpp:requests_processing", "Number of requests processing", value=pool.running)
    yield g("llamacpp:requests_deferred", "Number of requests deferred", value=m.waiting)


#: Dialect name -> the function that yields its families.
_RENDER: dict[str, Callable[[EngineCounters], Iterator[Metric]]] = {
    "vllm": _vllm,
    "sglang": _sglang,
    "tgi": _tgi,
    "llamacpp": _llamacpp,
}
DIALECTS = tuple(_RENDER)


def families(m: EngineCounters) -> Iterator[Metric]:
    """The families of ``m``'s dialect."""
    return _RENDER[m.dialect](m)
