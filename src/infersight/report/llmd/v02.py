"""llm-d-benchmark's benchmark report 0.2.1 (``--format llm-d``), built with the
format's own package (``llmd_benchmark_report.BenchmarkReportV02``). One report per
level: ``run`` (``eid`` groups one run's levels), ``scenario`` (the engine as a stack
component, infersight's load for this point) and ``results``: the level's aggregate;
one time-series point per request at its intended send time (TTFT, request latency,
TPOT, its input and output tokens over its latency), which ``importers.llmd`` reads
back as request records; the engine's gauges; and under ``observability.infersight``
what the format has no field for. docs/design.md section 2 ("Export") maps each field.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import orjson
from llmd_benchmark_report import BenchmarkReportV02
from llmd_benchmark_report.base import Units
from llmd_benchmark_report.native_to_br0_2 import config_hash
from llmd_benchmark_report.schema_v0_2 import (
    AggregateLatency,
    AggregateRequestPerformance,
    AggregateRequests,
    AggregateThroughput,
    Component,
    ComponentMetadata,
    ComponentNative,
    ComponentObservability,
    Distribution,
    Load,
    LoadMetadata,
    LoadNative,
    LoadSource,
    LoadStandardized,
    Observability,
    RequestPerformance,
    ResourceMetrics,
    Results,
    Run,
    RunTime,
    Scenario,
    SequenceLength,
    Statistics,
    TimeSeriesData,
    TimeSeriesLatency,
    TimeSeriesPoint,
    TimeSeriesRequestPerformance,
    TimeSeriesResourceMetrics,
    TimeSeriesThroughput,
)
from llmd_benchmark_report.schema_v0_2_components import (
    HostType,
    InferenceEngine,
    InferenceEngineAccelerator,
    InferenceEngineModel,
    InferenceEngineParallelism,
)

import infersight.report.llmd.parts as parts
from infersight.core.numbers import as_float
from infersight.core.records import RequestRecord, RunResult

__all__ = ["ENGINE_LABEL", "report_v02"]

#: The stack component the engine's gauges refer to.
ENGINE_LABEL = "engine-0"


def _hash(doc: Any) -> str:
    return config_hash(orjson.loads(orjson.dumps(doc, default=str)))


def _when(t: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(t, tz=dt.UTC)


def _stat(values: dict[str, float] | None, units: Units) -> Statistics | None:
    return None if values is None else Statistics(units=units, **values)


def _one(value: float, units: Units) -> Statistics:
    return Statistics(units=units, mean=value, stddev=None)


def _aggregate(part: parts.LevelPart) -> AggregateRequestPerformance:
    agg, ok = part.agg, part.ok
    requests = agg.get("requests") or {}
    out_tps = as_float(agg.get("output_token_throughput")) or 0.0
    in_tps = part.input_tokens_per_s
    prompts = [r.prompt_tokens for r in ok if r.prompt_tokens is not None]
    return AggregateRequestPerformance(
        requests=AggregateRequests(
            total=int(requests.get("total", len(part.records))),
            failures=int(requests.get("errors", len(part.records) - len(ok))),
            incomplete=int(requests.get("cancelled", 0)),
            input_length=_stat(parts.count_stats(prompts), Units.COUNT) if prompts else None,
            output_length=_stat(parts.count_stats([r.output_tokens for r in ok]), Units.COUNT),
        ),
        latency=AggregateLatency(
            time_to_first_token=_stat(parts.stat_values(agg.get("ttft")), Units.S),
            time_per_output_token=_stat(parts.stat_values(agg.get("tpot")), Units.S_PER_TOKEN),
            inter_token_latency=_stat(parts.stat_values(agg.get("itl")), Units.S_PER_TOKEN),
            request_latency=_stat(parts.stat_values(agg.get("e2e")), Units.S),
        ),
        throughput=AggregateThroughput(
            input_token_rate=_one(in_tps, Units.TOKEN_PER_S),
            output_token_rate=_one(out_tps, Units.TOKEN_PER_S),
            total_token_rate=_one(in_tps + out_tps, Units.TOKEN_PER_S),
            request_rate=_one(as_float(agg.get("request_throughput")) or 0.0, Units.QUERY_PER_S),
        ),
    )


def _series(
    recs: Sequence[RequestRecord], wall: float, units: Units, f: Callable[[RequestRecord], Any]
) -> TimeSeriesData:
    """One point per request, at its intended send time, valued ``f(record)``."""
    return TimeSeriesData(
        units=units,
        series=[
            TimeSeriesPoint(ts=_when(r.scheduled + wall), value=f(r), stddev=None) for r in recs
        ],
    )


def _per_token(n: int | None, r: RequestRecord) -> float | None:
    e2e = r.e2e
    return n / e2e if n is not None and e2e is not None and e2e > 0 else None


def _time_series(part: parts.LevelPart) -> TimeSeriesRequestPerformance | None:
    """Every request of the level as one point of each series (docs/design.md §10)."""
    recs = sorted(part.records, key=lambda r: r.scheduled)
    if not recs:
        return None
    w = part.wall
    return TimeSeriesRequestPerformance(
        latency=TimeSeriesLatency(
            time_to_first_token=_series(recs, w, Units.S, lambda r: r.ttft),
            time_per_output_token=_series(recs, w, Units.S_PER_TOKEN, lambda r: r.tpot),
            request_latency=_series(recs, w, Units.S, lambda r: r.e2e),
        ),
        throughput=TimeSeriesThroughput(
            input_token_rate=_series(
                recs, w, Units.TOKEN_PER_S, lambda r: _per_token(r.prompt_tokens, r)
            ),
            output_token_rate=_series(
                recs, w, Units.TOKEN_PER_S, lambda r: _per_token(r.output_tokens if r.ok else 0, r)
            ),
        ),
    )


def _observability(result: RunResult, part: parts.LevelPart) -> Observability:
    gauges = parts.engine_gauges(result, part.span)
    extra: dict[str, Any] = {"infersight": parts.verdict_metadata(result, part)}
    if not gauges:
        return Observability.model_validate(extra)

    def series(name: str, units: Units) -> TimeSeriesData | None:
        pts = gauges.get(name)
        if not pts:
            return None
        return TimeSeriesData(
            units=units,
            series=[TimeSeriesPoint(ts=_when(t + part.wall), value=v, stddev=None) for t, v in pts],
        )

    def stats(name: str, units: Units) -> Statistics | None:
        pts = gauges.get(name)
        return Statistics(units=units, **parts.count_stats([v for _, v in pts])) if pts else None

    component = ComponentObservability(
        component_label=ENGINE_LABEL,
        aggregate=ResourceMetrics(
            running_requests=stats("engine.requests_running", Units.COUNT),
            waiting_requests=stats("engine.requests_waiting", Units.COUNT),
            kv_cache_usage=stats("engine.kv_cache_usage", Units.FRACTION),
        ),
        time_series=TimeSeriesResourceMetrics(
            num_requests_running=series("engine.requests_running", Units.COUNT),
            num_requests_waiting=series("engine.requests_waiting", Units.COUNT),
            kv_cache_usage=series("engine.kv_cache_usage", Units.FRACTION),
        ),
    )
    return Observability.model_validate({"components": [component], **extra})


def _engine(result: RunResult) -> Component:
    name, version = parts.engine_name(result)
    gpus = result.environment.get("gpus") or []
    first = gpus[0] if gpus and isinstance(gpus[0], dict) else {}
    args = parts.engine_args(result)
    return Component(
        metadata=ComponentMetadata(label=ENGINE_LABEL, cfg_id=_hash(args)),
        standardized=InferenceEngine(
            kind="inference_engine",
            tool=name,
            tool_version=version or "unknown",
            role=HostType.REPLICA,
            replicas=1,
            model=InferenceEngineModel(name=str(result.config.get("model") or "unknown")),
            accelerator=InferenceEngineAccelerator(
                model=str(first.get("name") or ("unknown" if gpus else "none (CPU)")),
                count=len(gpus),
                parallelism=InferenceEngineParallelism(
                    tp=1, dp=1, dp_local=1, workers=1, ep=1, pp=1
                ),
            ),
        ),
        native=ComponentNative(args=args),
    )


def _length(configured: Any, measured: Sequence[float]) -> SequenceLength | None:
    if isinstance(configured, int) and configured >= 0:
        return SequenceLength(
            distribution=Distribution.FIXED, value=configured, std_dev=None, min=None, max=None
        )
    if not measured:
        return None
    s = parts.count_stats(measured)
    return SequenceLength(
        distribution=Distribution.OTHER,
        value=s["mean"],
        std_dev=s["stddev"],
        min=int(s["min"]),
        max=max(int(s["max"]), 1),
    )


def _load(result: RunResult, part: parts.LevelPart) -> Load:
    cfg, ok = result.config, part.ok
    target = part.agg.get("target") or {}
    rate, conc = as_float(target.get("rate")), target.get("concurrency")
    args = parts.load_args(result, part)
    prompts = [float(r.prompt_tokens) for r in ok if r.prompt_tokens is not None]
    input_len = _length(cfg.get("input_tokens"), prompts) or SequenceLength(
        distribution=Distribution.OTHER, value=0, std_dev=None, min=None, max=None
    )
    sourced = cfg.get("dataset") or cfg.get("trace")
    return Load(
        metadata=LoadMetadata(cfg_id=_hash(args), description=f"level {part.name}"),
        standardized=LoadStandardized(
            tool="infersight",
            tool_version=result.versions.get("infersight") or "unknown",
            parallelism=1,
            source=LoadSource.SAMPLED if sourced else LoadSource.RANDOM,
            stage=part.index,
            input_seq_len=input_len,
            output_seq_len=_length(cfg.get("output_tokens") or cfg.get("max_tokens"), []),
            rate_qps=rate if rate is not None and rate > 0 else None,
            concurrency=conc if isinstance(conc, int) and conc >= 1 else None,
        ),
        native=LoadNative(args=args),
    )


def report_v02(result: RunResult, part: parts.LevelPart) -> BenchmarkReportV02:
    """The 0.2.1 report of one level of ``result``."""
    run_key = result.run_id or f"{result.kind}-{result.created:.6f}"
    model = str(result.config.get("model") or "unknown")
    time = None
    if part.span is not None:
        time = RunTime(
            start=_when(part.span[0] + part.wall),
            end=_when(part.span[1] + part.wall),
            duration=f"PT{part.duration:.6f}S",
        )
    return BenchmarkReportV02(
        run=Run(
            uid=uuid.uuid5(uuid.NAMESPACE_URL, f"infersight:{run_key}:{part.name}").hex,
            eid=uuid.uuid5(uuid.NAMESPACE_URL, f"infersight:{run_key}").hex,
            time=time,
            description=f"{model} [{run_key}] {part.name}",
        ),
        scenario=Scenario(stack=[_engine(result)], load=_load(result, part)),
        results=Results(
            request_performance=RequestPerformance(
                aggregate=_aggregate(part), time_series=_time_series(part)
            ),
            observability=_observability(result, part),
        ),
    )
