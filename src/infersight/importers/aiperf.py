"""AIPerf's profile export: the per-request JSON Lines (``profile_export.jsonl``) and
the aggregate JSON (``profile_export_aiperf.json``).

The JSON Lines hold one record per request of the profiling phase (warm-up records
are left out), with nanosecond wall-clock times: ``credit_issued_ns`` (when AIPerf's
timing manager released the request: our ``scheduled``), ``request_start_ns``
(``sent``), ``request_end_ns`` (``end``), and the metrics in milliseconds: the first
chunk at ``time_to_first_token`` after the start, then each ``inter_chunk_latency``
gap. The run is one level; its target (concurrency or rate) comes from the aggregate
JSON beside the file when there is one, else it is the most requests seen in flight.

AIPerf's ``inter_token_latency`` is ``(request_latency - TTFT) / (OSL - 1)``: it runs
to the end of the response, where our TPOT runs to the last chunk. It is kept beside
ours.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import infersight.importers.common as common
from infersight.core.records import RequestRecord, RunResult
from infersight.importers.tool_stats import aggregate_from_stats, tool_metric

__all__ = ["FORMAT_RECORDS", "FORMAT_SUMMARY", "looks_like_record", "looks_like_summary", "read"]

FORMAT_RECORDS = "aiperf-records"
FORMAT_SUMMARY = "aiperf-summary"
LABEL_RECORDS = "AIPerf per-request export (JSON Lines)"
LABEL_SUMMARY = "AIPerf aggregate export JSON"

_ITL = "aiperf.inter_token_latency"
DEFINITIONS = {
    _ITL: "AIPerf's ITL: (request latency - TTFT) / (output tokens - 1), to the end of "
    "the response (ours, TPOT: to the last chunk)",
}
_RERUN = "AIPerf writes per-request timings to profile_export.jsonl at --export-level records"


def looks_like_summary(doc: Any) -> bool:
    return isinstance(doc, dict) and (
        "aiperf_version" in doc or ("input_config" in doc and "request_throughput" in doc)
    )


def looks_like_record(doc: Any) -> bool:
    meta = doc.get("metadata") if isinstance(doc, dict) else None
    return (
        isinstance(meta, dict)
        and "metrics" in doc
        and ("request_start_ns" in meta or "benchmark_phase" in meta)
    )


def read(data: bytes, source: str, fmt: str) -> RunResult:
    """The RunResult of an AIPerf export (``fmt``: records or summary)."""
    if fmt == FORMAT_SUMMARY:
        return _read_summary(common.load_json(data), source)
    return _read_records(data, source)


# -- the aggregate JSON -------------------------------------------------------------
def _target(doc: Any) -> tuple[int | None, float | None]:
    """The profiling phase's concurrency or rate, from ``input_config``."""
    cfg = doc.get("input_config") if isinstance(doc, dict) else None
    phases = cfg.get("phases") if isinstance(cfg, dict) else None
    for ph in phases if isinstance(phases, list) else []:
        if isinstance(ph, dict) and ph.get("kind", "profiling") == "profiling":
            rate = common.as_float(ph.get("rate"))
            conc = common.as_int(ph.get("concurrency"))
            return (None, rate) if rate is not None else (conc, None)
    return None, None


def _avg(doc: dict[str, Any], key: str) -> float | None:
    m = doc.get(key)
    return common.as_float(m.get("avg")) if isinstance(m, dict) else None


def _stats(doc: dict[str, Any], key: str) -> dict[str, Any]:
    m = doc.get(key)
    return m if isinstance(m, dict) else {}


def _read_summary(doc: Any, source: str) -> RunResult:
    if not isinstance(doc, dict):
        raise common.Malformed("the document is not an object")
    common.need(doc, "request_throughput", dict, "the export")
    conc, rate = _target(doc)
    count = _avg(doc, "request_count")
    ok = _avg(doc, "completed_request_count")
    ok = ok if ok is not None else count
    errors = sum(
        common.as_int(e.get("count")) or 0
        for e in doc.get("error_summary") or []
        if isinstance(e, dict)
    )
    agg = aggregate_from_stats(
        conc,
        rate,
        ok_count=None if ok is None else int(ok),
        errors=errors,
        request_rate=_avg(doc, "request_throughput"),
        token_rate=_avg(doc, "output_token_throughput"),
        latency={
            "ttft_from_sent": (_stats(doc, "time_to_first_token"), 0.001),
            "itl": (_stats(doc, "inter_chunk_latency"), 0.001),
            "e2e_from_sent": (_stats(doc, "request_latency"), 0.001),
        },
    )
    level = common.ImportedLevel(
        common.level_name(conc, rate), concurrency=conc, rate=rate, aggregate=agg
    )
    level.tool_metrics = {
        _ITL: tool_metric(
            DEFINITIONS[_ITL], ours=None, scale=0.001, summary=_stats(doc, "inter_token_latency")
        )
    }
    spec = _spec(source, doc)
    spec.missing = [
        "per-request timings (the file holds AIPerf's aggregates only)",
        "engine telemetry (running, waiting, KV usage)",
    ]
    spec.rerun_hint = _RERUN
    return common.build_run(spec, [level])


def _spec(source: str, summary: Any) -> common.ImportSpec:
    cfg = common.obj(summary, "input_config")
    urls = common.obj(cfg, "endpoint").get("urls")
    models = common.obj(cfg, "models").get("items")
    version = summary.get("aiperf_version") if isinstance(summary, dict) else None
    return common.ImportSpec(
        format=FORMAT_SUMMARY,
        tool="AIPerf",
        source=source,
        tool_version=str(version) if version else None,
        url=urls[0] if isinstance(urls, list) and urls and isinstance(urls[0], str) else None,
        model=models[0].get("name")
        if isinstance(models, list) and models and isinstance(models[0], dict)
        else None,
        definitions=DEFINITIONS,
    )


# -- the per-request JSON Lines ------------------------------------------------------
def _lines(data: bytes) -> list[Any]:
    out = []
    for n, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append(common.load_json(line))
        except common.Malformed as e:
            raise common.Malformed(f"line {n}: {e}") from None
    return out


def _sibling_summary(source: str) -> Any:
    """The aggregate JSON AIPerf wrote beside the records, when it is there."""
    p = Path(source)
    for name in (
        p.with_name(p.stem + "_aiperf.json"),
        p.with_suffix(".json"),
        p.with_name("profile_export_aiperf.json"),
    ):
        if name != p and name.is_file():
            try:
                doc = common.load_json(name.read_bytes())
            except (OSError, common.Malformed):
                continue
            if looks_like_summary(doc):
                return doc
    return None


def _read_records(data: bytes, source: str) -> RunResult:
    docs = _lines(data)
    records = []
    itl: list[float] = []
    for n, doc in enumerate(docs, 1):
        meta = common.need(doc, "metadata", dict, f"line {n}")
        if meta.get("benchmark_phase", "profiling") != "profiling":
            continue  # warm-up requests are not measured
        rec, own_itl = _record(doc, meta, n)
        records.append(rec)
        if own_itl is not None:
            itl.append(own_itl)
    summary = _sibling_summary(source)
    conc, rate = _target(summary)
    spec = _spec(source, summary)
    spec.format = FORMAT_RECORDS
    spec.missing = ["engine telemetry (running, waiting, KV usage)"]
    if conc is None and rate is None and records:
        conc = _max_in_flight(records)
        spec.notes.append(
            f"target concurrency {conc} inferred from the requests in flight "
            "(no AIPerf aggregate JSON beside the file names it)"
        )
    level = common.ImportedLevel(
        common.level_name(conc, rate), concurrency=conc, rate=rate, records=records
    )
    level.tool_metrics = {_ITL: tool_metric(DEFINITIONS[_ITL], ours=None, values=itl, scale=0.001)}
    return common.build_run(spec, [level])


def _ms(metrics: dict[str, Any], key: str) -> Any:
    m = metrics.get(key)
    return m.get("value") if isinstance(m, dict) else None


def _record(
    doc: dict[str, Any], meta: dict[str, Any], n: int
) -> tuple[RequestRecord, float | None]:
    start = common.as_float(meta.get("request_start_ns"))
    if start is None:
        raise common.Malformed(f"line {n}: metadata.request_start_ns is missing")
    issued = common.as_float(meta.get("credit_issued_ns"))
    end = common.as_float(meta.get("request_end_ns"))
    rec = RequestRecord(
        request_id=str(meta.get("x_request_id") or f"line-{n}"),
        scheduled=(issued if issued is not None else start) / 1e9,
        sent=start / 1e9,
        end=None if end is None else end / 1e9,
        attempts=1,
    )
    metrics = common.obj(doc, "metrics")
    trace = common.obj(doc, "trace_data")
    headers = common.as_float(trace.get("response_headers_received_ns"))
    rec.headers = None if headers is None else headers / 1e9
    ttft = common.as_float(_ms(metrics, "time_to_first_token"))
    if ttft is not None:
        t = rec.sent + ttft / 1000 if rec.sent is not None else None
        times = [] if t is None else [t]
        gaps = _ms(metrics, "inter_chunk_latency")
        for g in gaps if isinstance(gaps, list) else []:
            gv = common.as_float(g)
            if gv is None or t is None:
                raise common.Malformed(f"line {n}: inter_chunk_latency holds {g!r}, not a number")
            t += gv / 1000
            times.append(t)
        rec.chunk_times = times
        rec.chunk_tokens = [1] * len(times)
    osl = common.as_int(_ms(metrics, "usage_completion_tokens"))
    rec.completion_tokens = (
        osl if osl is not None else common.as_int(_ms(metrics, "output_sequence_length"))
    )
    isl = common.as_int(_ms(metrics, "usage_prompt_tokens"))
    rec.prompt_tokens = (
        isl if isl is not None else common.as_int(_ms(metrics, "input_sequence_length"))
    )
    error = doc.get("error")
    rec.cancelled = bool(meta.get("was_cancelled"))
    if isinstance(error, dict):
        code = common.as_int(error.get("code"))
        rec.status = code
        rec.error = "ServerError" if code is None or code >= 500 else "BadRequest"
        rec.error_message = str(error.get("message") or error.get("type") or "error")[:300]
    else:
        rec.status = common.as_int(trace.get("response_status_code")) or 200
        rec.ok = not rec.cancelled and rec.end is not None
    return rec, common.as_float(_ms(metrics, "inter_token_latency"))


def _max_in_flight(records: list[RequestRecord]) -> int:
    """The most requests in flight at once (sends +1, ends -1)."""
    events = sorted(
        [(r.sent or r.scheduled, 1) for r in records]
        + [(r.end, -1) for r in records if r.end is not None]
    )
    now = top = 0
    for _, step in events:
        now += step
        top = max(top, now)
    return max(1, top)
