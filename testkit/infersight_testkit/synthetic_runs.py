"""Realistic synthetic RunResults for the report tests and ``benchmarks/report_render.py``.

A closed-loop run over several concurrency levels against a server with ``slots``
slots: latency grows with queueing above the slot count, a few requests fail with the
error kinds a real run sees, and telemetry samples (GPU, host, engine queues) cover the
run on the same monotonic axis as the records.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from infersight.core.records import RequestRecord, RunResult, Sample
from infersight.core.verdicts import Verdict

ERROR_KINDS = (
    ("RateLimited", 429),
    ("Overloaded", 503),
    ("FirstTokenTimeout", None),
    ("TruncatedStream", 200),
)


def make_run(
    n_requests: int = 1200,
    *,
    levels: Sequence[int] = (1, 4, 16),
    slots: int = 8,
    seed: int = 0,
    model: str = "SmolLM2-135M-Instruct",
    error_rate: float = 0.02,
    tokens: tuple[int, int] = (8, 64),
    base_itl: float = 0.01,
    base_ttft: float = 0.05,
    gpu: bool = True,
    t_base: float = 5000.0,
    run_id: str = "synthetic",
    diagnosis: list[dict[str, Any]] | None = None,
    client_limited: bool = False,
    queue_delay: bool = True,
) -> RunResult:
    """A RunResult with ``n_requests`` records spread over the concurrency ``levels``."""
    rng = np.random.default_rng(seed)
    records: list[RequestRecord] = []
    samples: list[Sample] = []
    t = t_base
    per_level = max(1, n_requests // len(levels))
    spans = []
    for li, c in enumerate(levels):
        n = per_level if li < len(levels) - 1 else n_requests - per_level * (len(levels) - 1)
        load = c / slots
        itl = base_itl * (1 + 0.08 * min(c, slots))
        mean_tok = sum(tokens) / 2
        service = base_ttft + itl * mean_tok
        wait = max(0.0, load - 1.0) * service  # queueing above the slot count
        dur = n * service / min(c, slots) + 0.5
        sched = t + np.sort(rng.uniform(0.0, dur, n))
        lag = rng.exponential(0.0003 if not client_limited else 0.02, n)
        ttft = base_ttft * rng.lognormal(0.0, 0.3, n) + wait * rng.uniform(0.5, 1.5, n)
        ntok = rng.integers(tokens[0], tokens[1] + 1, n)
        fail = rng.random(n) < error_rate
        kinds = rng.integers(0, len(ERROR_KINDS), n)
        qd = rng.exponential(wait / 2 + 0.001, n) if queue_delay and c > slots else None
        for i in range(n):
            s = float(sched[i])
            sent = s + float(lag[i])
            q = float(qd[i]) if qd is not None else 0.0
            rec = RequestRecord(
                request_id=f"{li}-{i}",
                scheduled=s,
                sent=sent,
                attempts=1,
                labels={"level": f"c={c}", "model": model},
            )
            if qd is not None:
                rec.queue_delay = q
            first = sent + q + float(ttft[i])
            k = int(ntok[i])
            if fail[i]:
                kind, status = ERROR_KINDS[int(kinds[i])]
                rec.error, rec.status = kind, status
                rec.error_message = f"{kind} from upstream (synthetic)"
                if kind == "TruncatedStream":
                    gaps = rng.exponential(itl, k // 2)
                    rec.chunk_times = (first + np.concatenate([[0.0], np.cumsum(gaps)])).tolist()
                    rec.chunk_tokens = [1] * len(rec.chunk_times)
                    rec.end = rec.chunk_times[-1]
                elif kind == "FirstTokenTimeout":
                    rec.end = sent + 5.0
                else:
                    rec.headers = rec.end = sent + 0.002
                records.append(rec)
                continue
            gaps = itl * rng.lognormal(0.0, 0.25, k - 1)
            times = first + np.concatenate([[0.0], np.cumsum(gaps)])
            rec.headers = first - 0.001
            rec.chunk_times = times.tolist()
            rec.chunk_tokens = [1] * k
            rec.end = float(times[-1]) + 0.0005
            rec.status, rec.ok, rec.finish_reason = 200, True, "length"
            rec.prompt_tokens, rec.completion_tokens = int(rng.integers(50, 400)), k
            records.append(rec)
        end = max(r.end or r.scheduled for r in records[-n:])
        spans.append((c, t, end))
        t = end + 1.0
    for c, start, end in spans:
        for ts in np.arange(start, end, 1.0):
            ts = float(ts)
            busy = min(1.0, c / slots)
            if gpu:
                samples.append(
                    Sample(ts, "gpu.utilization", min(1.0, 0.3 + 0.7 * busy), {"gpu": "0"})
                )
                samples.append(Sample(ts, "gpu.sm_activity", 0.15 + 0.5 * busy, {"gpu": "0"}))
            samples.append(Sample(ts, "host.cpu_percent", 20 + 60 * busy, {"cpu": "all"}))
            samples.append(
                Sample(ts, "process.cpu_percent", 100 * busy, {"name": "engine", "pid": "1"})
            )
            samples.append(
                Sample(ts, "engine.requests_running", float(min(c, slots)), {"engine": "llamacpp"})
            )
            samples.append(
                Sample(
                    ts, "engine.requests_waiting", float(max(c - slots, 0)), {"engine": "llamacpp"}
                )
            )
            samples.append(Sample(ts, "engine.kv_cache_usage", None, {"engine": "llamacpp"}))
    return RunResult(
        kind="bench",
        run_id=run_id,
        config={
            "levels": [{"name": f"c={c}", "concurrency": c} for c in levels],
            "model": model,
            "engine": {"engine": "llama.cpp", "parallel": slots, "model_name": model},
            "api_key": "sk-this-must-never-appear",
            "max_tokens": tokens[1],
        },
        versions={"python": "3.11", "infersight": "0.1.0", "llama.cpp": "b9999"},
        environment={
            "cpu": "synthetic 2-core",
            "gpus": [{"name": "NVIDIA H100 80GB HBM3"}] if gpu else [],
        },
        records=records,
        samples=samples,
        diagnosis=[
            Verdict.model_validate(v)
            for v in (diagnosis if diagnosis is not None else [sample_verdict(t_base, t)])
        ],
        client_limited=client_limited,
        client_limited_reasons=["schedule lag p99 20.1 ms > 5 ms"] if client_limited else [],
    )


def sample_verdict(start: float, end: float) -> dict[str, Any]:
    """A verdict dict shaped like ``Verdict.model_dump()`` (contracts section 6)."""
    return {
        "id": "slot_bound",
        "title": "Queueing: slot-bound",
        "summary": "8 of 8 slots busy, 8 waiting, KV at 35%; raise --parallel to 16.",
        "window": [start, end],
        "evidence": [
            {"name": "requests_running", "value": 8.0, "unit": "", "source": "engine /metrics"},
            {"name": "requests_waiting", "value": 8.0, "unit": "", "source": "engine /metrics"},
            {"name": "kv_cache_usage", "value": 0.35, "unit": "", "source": "engine /metrics"},
        ],
        "confidence": 0.85,
        "fixes": ["llama.cpp: raise --parallel from 8 to 16 (fits in memory)"],
    }
