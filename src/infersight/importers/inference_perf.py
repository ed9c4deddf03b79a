"""inference-perf's report: ``per_request_lifecycle_metrics.json`` (with
``report.request_lifecycle.per_request``), or a summary (``summary_`` /
``stage_N_lifecycle_metrics.json``) of aggregates alone.

A per-request entry has ``start_time`` and ``end_time`` (the load generator's
monotonic seconds) and ``info.response_metrics.output_token_times``, the arrival of
each output token: our chunk times. The entries do not name their stage; the stage
files beside the report give each stage's request count and target (concurrency or
rate), and the entries, in order of start, are dealt out to them. The file keeps no
intended send time, so ``scheduled`` is the start: TTFT and e2e count from the send
(inference-perf's ``schedule_delay`` summary is kept instead).

inference-perf's TTFT, TPOT and ITL are ours; its ``normalized_time_per_output_token``
(latency / output tokens) has no counterpart and is kept beside them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import infersight.importers.common as common
from infersight.core.records import RequestRecord, RunResult
from infersight.importers.tool_stats import aggregate_from_stats, tool_metric

__all__ = ["FORMAT_REQUESTS", "FORMAT_SUMMARY", "looks_like_requests", "looks_like_summary", "read"]

FORMAT_REQUESTS = "inference-perf-requests"
FORMAT_SUMMARY = "inference-perf-summary"
LABEL_REQUESTS = "inference-perf per-request report"
LABEL_SUMMARY = "inference-perf lifecycle summary"

_NTPOT = "inference_perf.normalized_time_per_output_token"
_DELAY = "inference_perf.schedule_delay"
DEFINITIONS = {
    _NTPOT: "inference-perf's NTPOT: request latency / output tokens (no counterpart)",
    _DELAY: "inference-perf's schedule delay: request start - its scheduled time (our "
    "schedule lag; the per-request file does not keep the scheduled time)",
}
_MISSING_TELEMETRY = "engine telemetry (running, waiting, KV usage)"


def looks_like_requests(doc: Any) -> bool:
    return (
        isinstance(doc, list)
        and bool(doc)
        and isinstance(doc[0], dict)
        and (
            "start_time" in doc[0]
            and "end_time" in doc[0]
            and ("info" in doc[0] or "error" in doc[0])
        )
    )


def looks_like_summary(doc: Any) -> bool:
    return isinstance(doc, dict) and (
        "load_summary" in doc or ("successes" in doc and "failures" in doc)
    )


def read(data: bytes, source: str, fmt: str) -> RunResult:
    """The RunResult of an inference-perf report (``fmt``: per-request or summary)."""
    doc = common.load_json(data)
    if fmt == FORMAT_SUMMARY:
        return _read_summary(doc, source)
    if not isinstance(doc, list):
        raise common.Malformed("the per-request report is not a list of requests")
    return _read_requests(doc, source)


def _stage_target(doc: Any) -> tuple[int | None, float | None]:
    load = doc.get("load_summary") if isinstance(doc, dict) else None
    if not isinstance(load, dict):
        return None, None
    conc = common.as_int(load.get("concurrency"))
    return (conc, None) if conc else (None, common.as_float(load.get("requested_rate")))


def _stages(source: str) -> list[tuple[int, dict[str, Any]]]:
    """The stage summaries beside the report, in stage order: (requests, summary)."""
    folder = Path(source).parent
    out = []
    k = 0
    while (p := folder / f"stage_{k}_lifecycle_metrics.json").is_file():
        try:
            doc = common.load_json(p.read_bytes())
        except (OSError, common.Malformed):
            return []
        load = doc.get("load_summary") if isinstance(doc, dict) else None
        count = common.as_int(load.get("count")) if isinstance(load, dict) else None
        if count is None:
            return []
        out.append((count, doc))
        k += 1
    return out


def _read_requests(entries: list[Any], source: str) -> RunResult:
    records: list[tuple[RequestRecord, float | None]] = []
    for j, entry in enumerate(entries):
        records.append(_record(entry, j))
    records.sort(key=lambda x: x[0].scheduled)
    common.check_records([r for r, _ in records])  # before NTPOT is summarised from them
    spec = common.ImportSpec(
        format=FORMAT_REQUESTS,
        tool="inference-perf",
        source=source,
        definitions=DEFINITIONS,
        missing=[
            "each request's scheduled time (TTFT and e2e count from the "
            "send; schedule lag unknown)",
            _MISSING_TELEMETRY,
        ],
    )
    stages = _stages(source)
    if sum(n for n, _ in stages) != len(records):
        if stages:
            spec.notes.append(
                "the stage files beside the report do not add up to its requests: read as one level"
            )
        stages = [(len(records), {})]
    levels: list[common.ImportedLevel] = []
    at = 0
    for count, summary in stages:
        conc, rate = _stage_target(summary)
        chunk = records[at : at + count]
        at += count
        lv = common.ImportedLevel(
            common.level_name(conc, rate) if summary else "all",
            concurrency=conc,
            rate=rate,
            records=[r for r, _ in chunk],
        )
        lv.tool_metrics = {
            _NTPOT: tool_metric(
                DEFINITIONS[_NTPOT], ours=None, values=[v for _, v in chunk if v is not None]
            )
        }
        delay = (summary.get("load_summary") or {}).get("schedule_delay") if summary else None
        if isinstance(delay, dict):
            lv.tool_metrics[_DELAY] = tool_metric(
                DEFINITIONS[_DELAY], ours="schedule_lag", summary=delay
            )
        levels.append(lv)
    return common.build_run(spec, levels)


def _record(entry: Any, j: int) -> tuple[RequestRecord, float | None]:
    where = f"request {j}"
    start = common.need(entry, "start_time", (int, float), where)
    end = common.as_float(entry.get("end_time"))
    rec = RequestRecord(
        request_id=f"r{j}", scheduled=float(start), sent=float(start), end=end, attempts=1
    )
    info = common.obj(entry, "info")
    resp = common.obj(info, "response_metrics")
    times = resp.get("output_token_times") or resp.get("chunk_times") or []
    if not isinstance(times, list):
        raise common.Malformed(f"{where}: output_token_times is not a list")
    rec.chunk_times = [t for x in times if (t := common.as_float(x)) is not None]
    rec.chunk_tokens = [1] * len(rec.chunk_times)
    usage = common.obj(resp, "server_usage")
    rec.completion_tokens = common.as_int(usage.get("completion_tokens"))
    if rec.completion_tokens is None:
        rec.completion_tokens = common.as_int(resp.get("output_tokens"))
    rec.prompt_tokens = common.as_int(usage.get("prompt_tokens"))
    if rec.prompt_tokens is None:
        rec.prompt_tokens = common.as_int(info.get("input_tokens"))
    error = entry.get("error")
    if isinstance(error, dict):
        rec.error = "ServerError"
        rec.error_message = f"{error.get('error_type', '')}: {error.get('error_msg', '')}"[:300]
        return rec, None
    rec.ok = end is not None
    rec.status = 200
    n = rec.output_tokens
    ntpot = (end - start) / n if end is not None and n else None
    return rec, ntpot


def _read_summary(doc: Any, source: str) -> RunResult:
    if not isinstance(doc, dict):
        raise common.Malformed("the summary is not an object")
    ok = common.need(doc, "successes", dict, "the summary")
    failures = common.obj(doc, "failures")
    latency = common.obj(ok, "latency")
    tput = common.obj(ok, "throughput")
    conc, rate = _stage_target(doc)
    ok_n = common.as_int(ok.get("count"))

    def stats(name: str) -> dict[str, Any]:
        s = latency.get(name)
        return {**s, "count": ok_n} if isinstance(s, dict) else {}

    agg = aggregate_from_stats(
        conc,
        rate,
        ok_count=ok_n,
        errors=common.as_int(failures.get("count")),
        request_rate=common.as_float(tput.get("requests_per_sec")),
        token_rate=common.as_float(tput.get("output_tokens_per_sec")),
        latency={
            "ttft_from_sent": (stats("time_to_first_token"), 1.0),
            "tpot": (stats("time_per_output_token"), 1.0),
            "itl": (stats("inter_token_latency"), 1.0),
            "e2e_from_sent": (stats("request_latency"), 1.0),
        },
    )
    level = common.ImportedLevel(
        common.level_name(conc, rate) if (conc or rate) else "all",
        concurrency=conc,
        rate=rate,
        aggregate=agg,
    )
    level.tool_metrics = {
        _NTPOT: tool_metric(
            DEFINITIONS[_NTPOT], ours=None, summary=stats("normalized_time_per_output_token")
        )
    }
    spec = common.ImportSpec(
        format=FORMAT_SUMMARY,
        tool="inference-perf",
        source=source,
        definitions=DEFINITIONS,
        missing=["per-request timings (the file holds aggregates only)", _MISSING_TELEMETRY],
        rerun_hint="inference-perf writes per_request_lifecycle_metrics.json "
        "with report.request_lifecycle.per_request: true",
    )
    return common.build_run(spec, [level])
