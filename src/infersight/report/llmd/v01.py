"""llm-d-benchmark's benchmark report, the 0.1 line (``--format llm-d:0.1``), built with
the format's own package (``llmd_benchmark_report.BenchmarkReportV01``).

0.1 has ``scenario`` (model, engine, load) and ``metrics`` (one load point's
aggregates, in ms and ms/token here). Its ``scenario.load.name`` must be one of the
harnesses llm-d-benchmark drives; infersight is none of them, so the load is named
``nop`` (no harness of the list) and ``scenario.load.metadata.tool`` says
``infersight``. What the format has no field for goes under ``metadata.infersight``.
"""

from __future__ import annotations

from typing import Any

from llmd_benchmark_report import BenchmarkReportV01
from llmd_benchmark_report.base import Units, WorkloadGenerator
from llmd_benchmark_report.schema_v0_1 import (
    EngineDetails,
    Host,
    HostAccelerator,
    HostType,
    Latency,
    Load,
    Metrics,
    Model,
    Platform,
    Requests,
    Scenario,
    Service,
    Statistics,
    Throughput,
    Time,
)

import infersight.report.llmd.parts as parts
from infersight.core.numbers import as_float
from infersight.core.records import RunResult

__all__ = ["report_v01"]


def _stats(values: dict[str, float], units: Units) -> Statistics:
    return Statistics(units=units, **values)


def _latency(part: parts.LevelPart) -> Latency:
    def one(key: str, units: Units) -> Statistics | None:
        v = parts.stat_values(part.agg.get(key), 1000.0)
        return None if v is None else _stats(v, units)

    ttft = one("ttft", Units.MS)
    assert ttft is not None  # level_parts keeps levels with a TTFT only
    return Latency(
        time_to_first_token=ttft,
        time_per_output_token=one("tpot", Units.MS_PER_TOKEN),
        inter_token_latency=one("itl", Units.MS_PER_TOKEN),
        request_latency=one("e2e", Units.MS),
    )


def _host(result: RunResult) -> Host | None:
    gpus = result.environment.get("gpus") or []
    if not gpus:
        return None  # the format's host describes accelerators; a CPU run has none
    first = gpus[0] if isinstance(gpus[0], dict) else {}
    mem = as_float(first.get("memory_total_bytes"))
    acc = HostAccelerator(
        model=str(first.get("name") or "unknown"),
        count=len(gpus),
        memory=None if mem is None else round(mem / 1e9, 1),
    )
    return Host(accelerator=[acc], type=[HostType.REPLICA])


def _service(result: RunResult, part: parts.LevelPart) -> Service | None:
    if part.span is None:
        return None
    gauges = parts.engine_gauges(result, part.span)
    running = [round(v) for _, v in gauges.get("engine.requests_running", [])]
    waiting = [round(v) for _, v in gauges.get("engine.requests_waiting", [])]
    if not running and not waiting:
        return None
    return Service(
        batch_size=_stats(parts.count_stats(running), Units.COUNT) if running else None,
        queue_size=_stats(parts.count_stats(waiting), Units.COUNT) if waiting else None,
    )


def _load(result: RunResult, part: parts.LevelPart) -> Load:
    target = part.agg.get("target") or {}
    rate, conc = target.get("rate"), target.get("concurrency")
    if isinstance(rate, int | float):
        kind = f"open loop at {rate:g} req/s"
    elif conc is not None:
        kind = f"closed loop with {conc} concurrent clients"
    else:
        kind = "trace replay"
    return Load(
        name=WorkloadGenerator.NOP,
        type=kind,
        args=parts.load_args(result, part),
        metadata={"tool": "infersight", "tool_version": result.versions.get("infersight")},
    )


def report_v01(result: RunResult, part: parts.LevelPart) -> BenchmarkReportV01:
    """The 0.1 report of one level of ``result``."""
    ok = part.ok
    requests = part.agg.get("requests") or {}
    out_tps = as_float(part.agg.get("output_token_throughput")) or 0.0
    in_tps = part.input_tokens_per_s
    time = Time(duration=part.duration)
    if part.span is not None:
        time = Time(
            duration=part.duration, start=part.span[0] + part.wall, stop=part.span[1] + part.wall
        )
    metrics = Metrics(
        time=time,
        requests=Requests(
            total=int(requests.get("total", len(part.records))),
            failures=int(requests.get("errors", len(part.records) - len(ok))),
            incomplete=int(requests.get("cancelled", 0)),
            input_length=_stats(
                parts.count_stats([r.prompt_tokens for r in ok if r.prompt_tokens is not None]),
                Units.COUNT,
            ),
            output_length=_stats(parts.count_stats([r.output_tokens for r in ok]), Units.COUNT),
        ),
        latency=_latency(part),
        throughput=Throughput(
            input_tokens_per_sec=in_tps,
            output_tokens_per_sec=out_tps,
            total_tokens_per_sec=in_tps + out_tps,
            requests_per_sec=as_float(part.agg.get("request_throughput")) or 0.0,
        ),
        service=_service(result, part),
    )
    name, version = parts.engine_name(result)
    scenario = Scenario(
        description=f"infersight {result.kind} {result.run_id}, level {part.name}",
        model=Model(name=str(result.config.get("model") or "unknown")),
        load=_load(result, part),
        platform=Platform(
            engine=[EngineDetails(name=name, version=version, args=parts.engine_args(result))]
        ),
        host=_host(result),
    )
    meta: dict[str, Any] = {"infersight": parts.verdict_metadata(result, part)}
    return BenchmarkReportV01(scenario=scenario, metrics=metrics, metadata=meta)
