"""Small documents in each format the importers read, shaped as the tools write them
(GuideLLM 0.8 benchmarks JSON, AIPerf 0.13 exports, inference-perf 0.7 reports, and
the fields ``vllm bench serve --save-result --save-detailed`` documents): two levels or
a few requests each, enough to exercise every reader. The integration tests read
the real tools' files; these are for the cases a real run does not make (broken,
truncated, odd)."""

from __future__ import annotations

import json
from typing import Any

__all__ = [
    "SAMPLES",
    "aiperf_records",
    "aiperf_summary",
    "guidellm",
    "inference_perf_requests",
    "inference_perf_summary",
    "vllm",
]

T0 = 1_796_000_000.0


def guidellm(requests: int = 3) -> dict[str, Any]:
    def req(k: int, streams: int) -> dict[str, Any]:
        s = T0 + k * 0.3
        return {
            "request_id": f"g{streams}-{k}",
            "info": {
                "timings": {
                    "targeted_start": s,
                    "request_start": s + 0.001,
                    "first_request_iteration": s + 0.01,
                    "first_token_iteration": s + 0.05,
                    "last_token_iteration": s + 0.2,
                    "token_iterations": 16,
                    "request_end": s + 0.201,
                }
            },
            "input_metrics": {"total_tokens": 16},
            "output_metrics": {"total_tokens": 16},
            "time_per_output_token_ms": 12.5,
            "inter_token_latency_ms": 10.0,
        }

    return {
        "metadata": {"guidellm_version": "0.8.0"},
        "config": {"spec": {"backend": {"target": "http://127.0.0.1:1", "model": "fake"}}},
        "benchmarks": [
            {
                "type_": "generative_benchmark",
                "config": {"strategy": {"type_": "concurrent", "streams": c}},
                "requests": {
                    "successful": [req(k, c) for k in range(requests)],
                    "errored": [],
                    "incomplete": [],
                },
                "metrics": {},
            }
            for c in (1, 2)
        ],
    }


def aiperf_records(requests: int = 3) -> list[dict[str, Any]]:
    out = []
    for k in range(requests):
        s = int((T0 + k * 0.3) * 1e9)
        out.append(
            {
                "metadata": {
                    "x_request_id": f"a{k}",
                    "credit_issued_ns": s,
                    "request_start_ns": s + 1_000_000,
                    "request_end_ns": s + 201_000_000,
                    "benchmark_phase": "profiling",
                    "was_cancelled": False,
                },
                "metrics": {
                    "time_to_first_token": {"value": 50.0, "unit": "ms"},
                    "inter_chunk_latency": {"value": [10.0] * 15, "unit": "ms"},
                    "inter_token_latency": {"value": 10.0, "unit": "ms"},
                    "usage_completion_tokens": {"value": 16, "unit": "tokens"},
                    "usage_prompt_tokens": {"value": 16, "unit": "tokens"},
                },
                "trace_data": {"response_status_code": 200},
                "error": None,
            }
        )
    return out


def _stats(ms: float) -> dict[str, Any]:
    return {
        "unit": "ms",
        "avg": ms,
        "p50": ms,
        "p90": ms,
        "p99": ms,
        "min": ms,
        "max": ms,
        "std": 0.0,
        "count": 8,
    }


def aiperf_summary() -> dict[str, Any]:
    return {
        "aiperf_version": "0.13.0",
        "input_config": {
            "models": {"items": [{"name": "fake"}]},
            "endpoint": {"urls": ["http://127.0.0.1:1"]},
            "phases": [{"kind": "profiling", "concurrency": 2}],
        },
        "request_throughput": {"unit": "requests/sec", "avg": 9.5},
        "request_count": {"avg": 8},
        "completed_request_count": {"avg": 8},
        "output_token_throughput": {"avg": 152.0},
        "time_to_first_token": _stats(50.0),
        "inter_chunk_latency": _stats(10.0),
        "inter_token_latency": _stats(10.0),
        "request_latency": _stats(200.0),
        "error_summary": [],
    }


def inference_perf_requests(requests: int = 3) -> list[dict[str, Any]]:
    out = []
    for k in range(requests):
        s = 100.0 + k * 0.3
        out.append(
            {
                "start_time": s,
                "end_time": s + 0.2,
                "request": "{}",
                "info": {
                    "input_tokens": 16,
                    "response_metrics": {
                        "output_token_times": [s + 0.05 + 0.01 * i for i in range(16)],
                        "server_usage": {"prompt_tokens": 16, "completion_tokens": 16},
                    },
                },
                "error": None,
            }
        )
    return out


def inference_perf_summary() -> dict[str, Any]:
    def s(v: float) -> dict[str, float]:
        return {"mean": v, "median": v, "p90": v, "p99": v, "min": v, "max": v}

    return {
        "load_summary": {"count": 8, "concurrency": 2, "schedule_delay": s(0.001)},
        "successes": {
            "count": 8,
            "latency": {
                "time_to_first_token": s(0.05),
                "time_per_output_token": s(0.01),
                "inter_token_latency": s(0.01),
                "request_latency": s(0.2),
                "normalized_time_per_output_token": s(0.0125),
            },
            "throughput": {"requests_per_sec": 9.5, "output_tokens_per_sec": 152.0},
        },
        "failures": {"count": 0},
    }


def vllm(requests: int = 3, detailed: bool = True) -> dict[str, Any]:
    """The documented keys of one ``vllm bench serve --save-result`` run."""
    doc: dict[str, Any] = {
        "date": "20261204-050000",
        "endpoint_type": "openai",
        "backend": "openai",
        "label": None,
        "model_id": "fake",
        "tokenizer_id": "fake",
        "num_prompts": requests,
        "request_rate": "inf",
        "burstiness": 1.0,
        "max_concurrency": 2,
        "duration": 0.7,
        "completed": requests,
        "failed": 0,
        "total_input_tokens": 16 * requests,
        "total_output_tokens": 16 * requests,
        "request_throughput": 4.3,
        "request_goodput": None,
        "output_throughput": 68.6,
        "total_token_throughput": 137.1,
        "max_output_tokens_per_s": 100.0,
        "max_concurrent_requests": 2,
    }
    for m, v in (("ttft", 50.0), ("tpot", 10.0), ("itl", 10.0), ("e2el", 200.0)):
        doc.update({f"mean_{m}_ms": v, f"median_{m}_ms": v, f"std_{m}_ms": 0.0, f"p99_{m}_ms": v})
    if detailed:
        doc.update(
            {
                "input_lens": [16] * requests,
                "output_lens": [16] * requests,
                "ttfts": [0.05] * requests,
                "itls": [[0.01] * 15] * requests,
                "latencies": [0.2] * requests,
                "start_times": [100.0 + 0.3 * k for k in range(requests)],
                "queue_times": [0.0] * requests,
                "generated_texts": ["tok " * 16] * requests,
                "errors": [""] * requests,
            }
        )
    return doc


def _jsonl(docs: list[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(d).encode() + b"\n" for d in docs)


#: Format id -> (the file's bytes, the label its errors name).
SAMPLES: dict[str, tuple[bytes, str]] = {
    "guidellm": (json.dumps(guidellm()).encode(), "GuideLLM benchmarks JSON"),
    "aiperf-records": (_jsonl(aiperf_records()), "AIPerf per-request export (JSON Lines)"),
    "aiperf-summary": (json.dumps(aiperf_summary()).encode(), "AIPerf aggregate export JSON"),
    "inference-perf-requests": (
        json.dumps(inference_perf_requests()).encode(),
        "inference-perf per-request report",
    ),
    "inference-perf-summary": (
        json.dumps(inference_perf_summary()).encode(),
        "inference-perf lifecycle summary",
    ),
    "vllm": (json.dumps(vllm()).encode(), "vllm bench serve --save-result JSON"),
}
