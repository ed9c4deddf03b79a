"""RunResult fixtures shaped like a vLLM deployment: the engine's documented metric
names normalised by data/telemetry/engines.toml (vllm:num_requests_running ->
engine.requests_running, vllm:num_requests_waiting -> engine.requests_waiting,
vllm:gpu_cache_usage_perc / kv_cache_usage_perc -> engine.kv_cache_usage,
vllm:num_preemptions_total -> engine.preemptions_total) and GPU readings in the
NVML field set (utilisation, GPM SM activity) recorded on an H100 SXM."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from infersight.core.records import RequestRecord, RunResult, Sample
from infersight.diagnose import Verdict

LLAMA3_8B: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
    "max_position_embeddings": 8192,
    "rope_theta": 500000.0,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}


@dataclass
class Scenario:
    """One synthetic vLLM run: a steady state held for ``duration`` seconds."""

    running: float = 64
    waiting: float = 0
    slots: int = 256
    kv: float = 0.3
    preempt_per_s: float = 0.0
    util: float = 0.9
    sm: float | None = 0.7
    engine_cpu: float = 40.0
    prompt: int = 1000
    output: int = 256
    ttft: float = 0.05
    itl: float = 0.012
    duration: float = 30.0
    error_kind: str | None = None
    error_every: int = 0
    engine_metrics: bool = True
    queue_delay: float | None = None
    concurrency: int | None = None
    seed: int = 0


def build_run(sc: Scenario) -> RunResult:
    """Records of a closed loop of ``concurrency`` clients plus 1 s telemetry samples."""
    rng = np.random.default_rng(sc.seed)
    conc = sc.concurrency or round(sc.running + sc.waiting)
    records: list[RequestRecord] = []
    t_base = 1000.0
    n = 0
    for _worker in range(max(1, conc)):
        t = t_base + rng.uniform(0, 0.05)
        while t < t_base + sc.duration:
            n += 1
            r = RequestRecord(request_id=f"r{n}", scheduled=t, labels={"level": f"c={conc}"})
            r.sent = t + 0.0002
            r.attempts = 1
            if sc.error_every and n % sc.error_every == 0:
                r.end = r.sent + 0.01
                r.status = {"RateLimited": 429, "Overloaded": 503, "AuthError": 401}.get(
                    sc.error_kind or "", 500
                )
                r.error = sc.error_kind
                r.error_message = f"HTTP {r.status}"
                r.labels["upstream"] = "vllm-a"
                records.append(r)
                t = r.end
                continue
            ttft = sc.ttft * rng.uniform(0.9, 1.1)
            first = r.sent + (sc.queue_delay or 0.0) + ttft
            gaps = sc.itl * rng.uniform(0.95, 1.05, size=sc.output - 1)
            r.chunk_times = [first, *(first + np.cumsum(gaps)).tolist()]
            r.chunk_tokens = [1] * sc.output
            r.end = r.chunk_times[-1] + 0.0005
            r.status, r.ok, r.finish_reason = 200, True, "length"
            r.prompt_tokens, r.completion_tokens = sc.prompt, sc.output
            r.queue_delay = sc.queue_delay
            records.append(r)
            t = r.end
    samples: list[Sample] = []
    eng = {"engine": "vllm", "source": "http://10.0.0.5:8000/metrics"}
    preempt = 0.0
    for i in range(int(sc.duration) + 1):
        ts = t_base + i
        jitter = rng.uniform(-0.02, 0.02)
        if sc.engine_metrics:
            samples += [
                Sample(ts, "engine.requests_running", max(0.0, sc.running * (1 + jitter)), eng),
                Sample(ts, "engine.requests_waiting", max(0.0, sc.waiting * (1 + jitter)), eng),
                Sample(ts, "engine.kv_cache_usage", min(1.0, sc.kv * (1 + jitter)), eng),
                Sample(ts, "engine.preemptions_total", preempt, eng),
                Sample(ts, "engine.slots", float(sc.slots), eng),
            ]
            preempt += sc.preempt_per_s
        samples += [
            Sample(ts, "gpu.utilization", min(1.0, sc.util * (1 + jitter / 4)), {"gpu": "0"}),
            Sample(ts, "gpu.memory_total_bytes", 85520809984.0, {"gpu": "0"}),
            Sample(ts, "process.cpu_percent", sc.engine_cpu, {"name": "engine", "pid": "4242"}),
            Sample(ts, "process.cpu_percent", 12.0, {"name": "loadgen", "pid": "77"}),
        ]
        if sc.sm is not None:
            samples.append(
                Sample(ts, "gpu.sm_activity", min(1.0, sc.sm * (1 + jitter)), {"gpu": "0"})
            )
    return RunResult(
        kind="bench",
        config={
            "levels": [{"name": f"c={conc}", "concurrency": conc}],
            "engine": {
                "url": "http://10.0.0.5:8000",
                "engine": "vllm" if sc.engine_metrics else "unknown",
            },
            "physics": {"model": LLAMA3_8B},
        },
        environment={"gpus": [{"name": "NVIDIA H100 80GB HBM3", "index": 0}]},
        records=records,
        samples=samples,
    )


def make_run(**kw: Any) -> RunResult:
    """A RunResult for the scenario given by keyword arguments."""
    return build_run(Scenario(**kw))


def ids(vs: list[Verdict]) -> list[str]:
    """The verdict ids, in order."""
    return [v.id for v in vs]


def one(vs: list[Verdict], vid: str) -> Verdict:
    """The verdict ``vid`` (the test fails, listing what there is, when it is absent)."""
    found = [v for v in vs if v.id == vid]
    assert found, f"no {vid} verdict in {ids(vs)}: {[v.summary for v in vs]}"
    return found[0]
