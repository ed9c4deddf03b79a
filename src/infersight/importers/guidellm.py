"""GuideLLM's benchmarks JSON (``guidellm run --output kind=json``; report version 2).

Each benchmark becomes a level: ``synchronous`` is ``c=1``, ``concurrent`` with N
streams ``c=N``, ``constant``/``poisson`` at a rate ``r=X``, ``throughput`` everything
at once. Each request's timings (Unix seconds) map to the record of docs/design.md
section 2:

- ``scheduled`` is ``targeted_start`` (when GuideLLM meant it to start), ``sent`` is
  ``request_start``, ``headers`` the first streamed iteration, ``end`` ``request_end``;
- GuideLLM keeps the first and the last token's time and the number of token
  iterations, not each one: the chunk times are spread evenly between the two, so
  TPOT and the per-request ITL are exact and the pooled ITL has no spread inside a
  request (said in ``missing``).

GuideLLM's ``time_per_output_token_ms`` counts from the request's start over every
output token (TTFT included), unlike our TPOT; its ``inter_token_latency_ms`` is our
TPOT. Both are kept beside ours.
"""

from __future__ import annotations

from typing import Any

import infersight.importers.common as common
from infersight.core.records import RequestRecord, RunResult
from infersight.importers.tool_stats import aggregate_from_stats, tool_metric

__all__ = ["FORMAT", "looks_like", "read"]

FORMAT = "guidellm"
LABEL = "GuideLLM benchmarks JSON"

DEFINITIONS = {
    "guidellm.time_per_output_token": "GuideLLM's TPOT: (last token - request start) / "
    "output tokens, TTFT included (ours: (last - first chunk) / (tokens - 1))",
    "guidellm.inter_token_latency": "GuideLLM's ITL: (last - first token) / (tokens - 1) "
    "per request (our TPOT; our ITL is pooled over every gap)",
}


def looks_like(doc: Any) -> bool:
    """A GuideLLM report: ``benchmarks`` of ``generative_benchmark`` objects."""
    if not isinstance(doc, dict) or not isinstance(doc.get("benchmarks"), list):
        return False
    meta = doc.get("metadata")
    if isinstance(meta, dict) and "guidellm_version" in meta:
        return True
    return any(
        isinstance(b, dict) and b.get("type_") == "generative_benchmark"
        for b in doc["benchmarks"][:1]
    )


def read(data: bytes, source: str, fmt: str = FORMAT) -> RunResult:
    """The RunResult of a GuideLLM report (``fmt``: this module's one format)."""
    doc = common.load_json(data)
    benchmarks = common.need(doc, "benchmarks", list, "the report")
    meta = common.obj(doc, "metadata")
    backend = (
        ((doc.get("config") or {}).get("spec") or {}).get("backend") or {}
        if isinstance(doc.get("config"), dict)
        else {}
    )
    levels = [_level(b, i) for i, b in enumerate(benchmarks)]
    spec = common.ImportSpec(
        format=FORMAT,
        tool="GuideLLM",
        source=source,
        tool_version=str(meta["guidellm_version"]) if meta.get("guidellm_version") else None,
        url=backend.get("target") if isinstance(backend.get("target"), str) else None,
        model=backend.get("model") if isinstance(backend.get("model"), str) else None,
        definitions=DEFINITIONS,
        rerun_hint="GuideLLM keeps every request unless --sample-requests limits it",
    )
    if any(lv.records for lv in levels):
        spec.missing.append(
            "each token's arrival time (GuideLLM keeps the first and last): "
            "chunk times are spread evenly between them, so pooled ITL "
            "percentiles have no spread inside a request"
        )
    else:
        spec.missing.append("per-request timings (the file keeps its requests' statistics only)")
    spec.missing.append("engine telemetry (running, waiting, KV usage)")
    return common.build_run(spec, levels)


def _level(bench: Any, i: int) -> common.ImportedLevel:
    where = f"benchmarks[{i}]"
    config = common.need(bench, "config", dict, where)
    strategy = common.need(config, "strategy", dict, f"{where}.config")
    kind = strategy.get("type_")
    conc: int | None = None
    rate: float | None = None
    if kind == "synchronous":
        conc = 1
    elif kind == "concurrent":
        conc = common.as_int(strategy.get("streams")) or common.as_int(
            strategy.get("max_concurrency")
        )
    elif kind in ("constant", "poisson"):
        rate = common.as_float(strategy.get("rate"))
    elif kind != "throughput":
        raise common.Malformed(
            f"{where}: strategy {kind!r} is not one GuideLLM writes "
            "(synchronous, concurrent, throughput, constant, poisson)"
        )
    level = common.ImportedLevel(
        common.level_name(conc, rate), concurrency=conc, rate=rate, all_at_once=kind == "throughput"
    )
    requests = common.need(bench, "requests", dict, where)
    for status in ("successful", "errored", "incomplete"):
        items = requests.get(status) or []
        if not isinstance(items, list):
            raise common.Malformed(f"{where}.requests.{status} is not a list")
        for j, item in enumerate(items):
            rec = _record(item, status, f"{where}.requests.{status}[{j}]")
            if rec is not None:
                level.records.append(rec)
    metrics = common.obj(bench, "metrics")
    if level.records:
        ok = [it for it in requests.get("successful") or [] if isinstance(it, dict)]
        level.tool_metrics = {
            name: tool_metric(
                DEFINITIONS[name],
                ours=ours,
                scale=0.001,
                values=[v for it in ok if (v := common.as_float(it.get(key))) is not None],
            )
            for name, key, ours in (
                ("guidellm.time_per_output_token", "time_per_output_token_ms", None),
                ("guidellm.inter_token_latency", "inter_token_latency_ms", "tpot"),
            )
        }
    else:
        level.aggregate = _aggregates_only(metrics, conc, rate)
        level.tool_metrics = {
            name: tool_metric(
                DEFINITIONS[name], ours=ours, scale=0.001, summary=_successful(metrics, key)
            )
            for name, key, ours in (
                ("guidellm.time_per_output_token", "time_per_output_token_ms", None),
                ("guidellm.inter_token_latency", "inter_token_latency_ms", "tpot"),
            )
        }
    return level


def _successful(metrics: dict[str, Any], name: str) -> dict[str, Any]:
    """A GuideLLM metric's distribution over its successful requests."""
    m = metrics.get(name)
    s = m.get("successful") if isinstance(m, dict) else None
    return s if isinstance(s, dict) else {}


def _record(item: Any, status: str, where: str) -> RequestRecord | None:
    info = common.need(item, "info", dict, where)
    t = common.need(info, "timings", dict, f"{where}.info")
    start = common.as_float(t.get("request_start"))
    sched = common.as_float(t.get("targeted_start"))
    if start is None and sched is None:
        return None  # never sent: nothing was measured
    scheduled = sched if sched is not None else start
    assert scheduled is not None
    rec = RequestRecord(
        request_id=str(item.get("request_id") or info.get("request_id") or where),
        scheduled=scheduled,
        sent=start,
    )
    rec.headers = common.as_float(t.get("first_request_iteration"))
    rec.end = common.as_float(t.get("request_end")) or common.as_float(t.get("resolve_end"))
    first, last = (
        common.as_float(t.get("first_token_iteration")),
        common.as_float(t.get("last_token_iteration")),
    )
    n = common.as_int(t.get("token_iterations")) or 0
    if n > common.MAX_TOKENS:
        raise common.Malformed(
            f"{where}.info.timings.token_iterations is {n}: more tokens than any response holds"
        )
    if first is not None:
        if last is None or n < 2 or last <= first:
            rec.chunk_times = [first]
        else:
            step = (last - first) / (n - 1)
            rec.chunk_times = [first + k * step for k in range(n - 1)] + [last]
        rec.chunk_tokens = [1] * len(rec.chunk_times)
    out_m = common.obj(item, "output_metrics")
    in_m = common.obj(item, "input_metrics")
    rec.completion_tokens = common.as_int(out_m.get("total_tokens"))
    rec.tokens_estimated = rec.completion_tokens is None
    rec.prompt_tokens = common.as_int(in_m.get("total_tokens"))
    rec.cached_tokens = common.as_int(in_m.get("cached_tokens"))
    rec.attempts = 1
    rec.ok = status == "successful"
    if status == "errored":
        rec.error = "ServerError"
        rec.error_message = str(info.get("error") or "errored")[:300]
    elif status == "incomplete":
        rec.cancelled = True
    return rec


def _aggregates_only(
    metrics: dict[str, Any], conc: int | None, rate: float | None
) -> dict[str, Any]:
    """A level from GuideLLM's statistics alone (its ``successful`` distributions)."""
    totals = common.obj(metrics, "request_totals")
    return aggregate_from_stats(
        conc,
        rate,
        ok_count=common.as_int(totals.get("successful")),
        errors=common.as_int(totals.get("errored")),
        request_rate=common.as_float(_successful(metrics, "requests_per_second").get("mean")),
        token_rate=common.as_float(_successful(metrics, "output_tokens_per_second").get("mean")),
        latency={
            "ttft_from_sent": (_successful(metrics, "time_to_first_token_ms"), 0.001),
            "tpot": (_successful(metrics, "inter_token_latency_ms"), 0.001),
            "e2e_from_sent": (_successful(metrics, "request_latency"), 1.0),
        },
    )
