"""The engine name map follows the engines' source code (data/telemetry/engines.toml):
names each collector really registers map to the normalised samples diagnose reads;
names no release exports are not in the map."""

from __future__ import annotations

import re

import pytest

from infersight.core.records import Sample
from infersight.telemetry import Normalizer, engine_specs

#: Gauges and counters as SGLang's collector.py registers them (prometheus_client adds
#: _total to counters), values of a retracting server.
SGLANG_NOW = """\
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="m"} 48.0
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{model_name="m"} 12.0
# TYPE sglang:token_usage gauge
sglang:token_usage{model_name="m"} 0.97
# TYPE sglang:num_retracted_requests counter
sglang:num_retracted_requests_total{model_name="m"} 31.0
# TYPE sglang:num_retracted_reqs gauge
sglang:num_retracted_reqs{model_name="m"} 2.0
# TYPE sglang:cached_tokens counter
sglang:cached_tokens_total{model_name="m"} 5000.0
# TYPE sglang:inter_token_latency_seconds histogram
sglang:inter_token_latency_seconds_bucket{le="0.01",model_name="m"} 10.0
sglang:inter_token_latency_seconds_bucket{le="+Inf",model_name="m"} 12.0
sglang:inter_token_latency_seconds_sum{model_name="m"} 0.2
sglang:inter_token_latency_seconds_count{model_name="m"} 12.0
"""

#: vLLM V1 (vllm/v1/metrics/loggers.py): no slot-limit metric at all.
VLLM_V1 = """\
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 4.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m"} 84.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.01
# TYPE vllm:num_preemptions counter
vllm:num_preemptions_total{engine="0",model_name="m"} 0.0
# TYPE vllm:request_inference_time_seconds histogram
vllm:request_inference_time_seconds_bucket{engine="0",le="+Inf",model_name="m"} 3.0
vllm:request_inference_time_seconds_sum{engine="0",model_name="m"} 0.72
vllm:request_inference_time_seconds_count{engine="0",model_name="m"} 3.0
"""


def _index(out: list[Sample]) -> dict[tuple[str, str], float | None]:
    return {(s.name, s.labels.get("stat", "")): s.value for s in out}


def test_sglang_retractions_counter_is_the_preemption_counter() -> None:
    idx = _index(Normalizer("sglang").normalize_text(SGLANG_NOW, 1.0))
    assert idx[("engine.preemptions_total", "")] == 31
    assert idx[("engine.requests_retracted", "")] == 2
    assert idx[("engine.kv_cache_usage", "")] == pytest.approx(0.97)
    assert idx[("engine.prompt_tokens_cached_total", "")] == 5000
    assert idx[("engine.itl_seconds", "count")] == 12
    assert not any(k[0].startswith("raw.") for k in idx), idx


def test_names_no_release_exports_are_gone() -> None:
    sglang = engine_specs()["sglang"].metrics
    assert "sglang:num_retractions_total" not in sglang
    assert "sglang:num_retracted_requests_total" in sglang
    # the one counter SGLang's collector does not register under that spelling
    text = "# TYPE sglang:num_retractions_total counter\nsglang:num_retractions_total 3.0\n"
    idx = _index(Normalizer("sglang").normalize_text(text, 1.0))
    assert ("engine.preemptions_total", "") not in idx


def test_vllm_v1_maps_and_exports_no_slot_limit() -> None:
    idx = _index(Normalizer("vllm").normalize_text(VLLM_V1, 1.0))
    assert idx[("engine.requests_running", "")] == 4
    assert idx[("engine.requests_waiting", "")] == 84
    assert idx[("engine.kv_cache_usage", "")] == pytest.approx(0.01)
    assert idx[("engine.preemptions_total", "")] == 0
    assert idx[("engine.inference_time_seconds", "count")] == 3
    assert ("engine.slots", "") not in idx
    spec = engine_specs()["vllm"]
    assert spec.slots == () and spec.slot_setting == "--max-num-seqs"


@pytest.mark.parametrize("engine", ["vllm", "sglang", "tgi"])
def test_each_map_records_the_source_commit_it_follows(engine: str) -> None:
    text = engine_specs()[engine].checked_against
    assert re.search(r"\b[0-9a-f]{40}\b", text), text
    assert ".notes" not in text


@pytest.mark.parametrize(
    ("engine", "flag"),
    [
        ("vllm", "--max-num-seqs"),
        ("sglang", "--max-running-requests"),
        ("tgi", "--max-batch-size"),
        ("llamacpp", "--parallel"),
    ],
)
def test_slot_settings_are_flags(engine: str, flag: str) -> None:
    assert engine_specs()[engine].slot_setting == flag
