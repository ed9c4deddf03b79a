"""``vllm bench serve --save-result`` JSON (one run per object; ``--append-result``
writes one object per line, each a level).

The keys are those ``vllm/benchmarks/serve.py`` saves: the run's setting
(``request_rate``, "inf" for all at once; ``max_concurrency``), its totals and the
``mean_/median_/std_/pNN_`` statistics of TTFT, TPOT, ITL and E2EL in milliseconds.
With ``--save-detailed`` it adds per-request arrays, in seconds: ``start_times``
(``time.perf_counter()`` when the request was sent), ``ttfts``, ``itls`` (each gap
between chunks), ``latencies``, ``input_lens``, ``output_lens``, ``errors`` and
``queue_times`` (``start - arrival``: how long after its arrival time each request
was sent). Those arrays become request records; without them the level has vLLM's
aggregates alone.

When each request is due depends on the run's setting. With a ``--request-rate`` the
arrival time is the intended send time (``start - queue``), and a late send is the
client's lag. With ``--max-concurrency`` and no rate every request "arrives" at once
and waits for one of N slots in the tool's own semaphore: that is a closed loop of N
clients, each due when its slot frees, so the send time is the intended one (as in
``bench --concurrency``). Reading the semaphore's wait as lag would call the client
late by the whole run.

vLLM's TPOT is ``(latency - TTFT) / (output tokens - 1)``: to the end of the response,
where ours runs to the last chunk. It is kept beside ours.
"""

from __future__ import annotations

from typing import Any

import infersight.importers.common as common
from infersight.core.records import RequestRecord, RunResult
from infersight.importers.tool_stats import aggregate_from_stats, tool_metric

__all__ = ["FORMAT", "looks_like", "read"]

FORMAT = "vllm"
LABEL = "vllm bench serve --save-result JSON"

_TPOT = "vllm.tpot"
DEFINITIONS = {
    _TPOT: "vLLM's TPOT: (latency - TTFT) / (output tokens - 1), to the end of the "
    "response (ours: to the last chunk)",
}
_ARRAYS = ("start_times", "ttfts", "itls", "latencies")


def looks_like(doc: Any) -> bool:
    return (
        isinstance(doc, dict)
        and "request_throughput" in doc
        and "completed" in doc
        and (
            "endpoint_type" in doc or "backend" in doc or "mean_ttft_ms" in doc or "duration" in doc
        )
    )


def read(data: bytes, source: str, fmt: str = FORMAT) -> RunResult:
    """The RunResult of one saved run, or of several appended ones (one per line)."""
    try:
        docs = [common.load_json(data)]
    except common.Malformed as whole:
        lines = [ln for ln in data.splitlines() if ln.strip()]
        if len(lines) < 2:
            raise whole from None
        docs = []
        for n, line in enumerate(lines, 1):
            try:
                docs.append(common.load_json(line))
            except common.Malformed as e:
                raise common.Malformed(f"line {n}: {e}") from None
    levels = []
    for i, doc in enumerate(docs):
        if not looks_like(doc):
            raise common.Malformed(
                f"run {i + 1} has no request_throughput/completed: not a saved run"
            )
        levels.append(_level(doc, i))
    first = docs[0]
    spec = common.ImportSpec(
        format=FORMAT,
        tool="vllm bench serve",
        source=source,
        model=first.get("model_id") if isinstance(first.get("model_id"), str) else None,
        definitions=DEFINITIONS,
    )
    if any(lv.records for lv in levels) and not all(
        isinstance(d.get("queue_times"), list) for d in docs
    ):
        spec.missing.append(
            "the intended send time (this vLLM saved no queue_times: when each request "
            "was sent, not when it was due)"
        )
    else:
        spec.missing.append("per-request timings (saved without --save-detailed)")
        spec.rerun_hint = "vllm bench serve --save-result --save-detailed keeps them"
    spec.missing.append("engine telemetry (running, waiting, KV usage)")
    return common.build_run(spec, levels)


def _target(doc: dict[str, Any]) -> tuple[int | None, float | None]:
    rate = common.as_float(doc.get("request_rate"))  # "inf" (a string) is all at once
    conc = common.as_int(doc.get("max_concurrency"))
    if rate is not None:
        return None, rate
    return conc, None


def _level(doc: dict[str, Any], i: int) -> common.ImportedLevel:
    conc, rate = _target(doc)
    level = common.ImportedLevel(
        common.level_name(conc, rate),
        concurrency=conc,
        rate=rate,
        all_at_once=conc is None and rate is None,
    )
    if all(isinstance(doc.get(k), list) for k in _ARRAYS):
        level.records, tpots = _records(doc, i, closed=conc is not None and rate is None)
        level.tool_metrics = {_TPOT: tool_metric(DEFINITIONS[_TPOT], ours=None, values=tpots)}
        return level
    ok = common.as_int(doc.get("completed"))
    level.aggregate = aggregate_from_stats(
        conc,
        rate,
        ok_count=ok,
        errors=common.as_int(doc.get("failed")),
        request_rate=common.as_float(doc.get("request_throughput")),
        token_rate=common.as_float(doc.get("output_throughput")),
        latency={
            "ttft_from_sent": (_stats(doc, "ttft", ok), 0.001),
            "itl": (_stats(doc, "itl", None), 0.001),
            "e2e_from_sent": (_stats(doc, "e2el", ok), 0.001),
        },
    )
    level.tool_metrics = {
        _TPOT: tool_metric(
            DEFINITIONS[_TPOT], ours=None, scale=0.001, summary=_stats(doc, "tpot", ok)
        )
    }
    return level


def _stats(doc: dict[str, Any], metric: str, count: int | None) -> dict[str, Any]:
    """``mean_ttft_ms``, ``p99_ttft_ms``... as one statistics object (milliseconds)."""
    out: dict[str, Any] = {}
    for key in ("mean", "median", "std"):
        if (v := common.as_float(doc.get(f"{key}_{metric}_ms"))) is not None:
            out[key] = v
    suffix = f"_{metric}_ms"
    for key, value in doc.items():
        if key.startswith("p") and key.endswith(suffix):
            out[key[: -len(suffix)]] = value  # p99, p99.9
    if out and count is not None:
        out["count"] = count
    return out


def _column(doc: dict[str, Any], key: str, n: int, i: int) -> list[Any]:
    col = doc.get(key)
    if col is None:
        return [None] * n
    if not isinstance(col, list) or len(col) != n:
        raise common.Malformed(
            f"run {i + 1}: {key} has {len(col) if isinstance(col, list) else 'no'} "
            f"entries for {n} requests"
        )
    return col


def _records(
    doc: dict[str, Any], i: int, *, closed: bool
) -> tuple[list[RequestRecord], list[float]]:
    n = len(doc["start_times"])
    cols = {
        k: _column(doc, k, n, i)
        for k in (*_ARRAYS, "queue_times", "input_lens", "output_lens", "errors")
    }
    records: list[RequestRecord] = []
    tpots: list[float] = []
    for j in range(n):
        sent = common.as_float(cols["start_times"][j])
        if sent is None:
            raise common.Malformed(f"run {i + 1}: start_times[{j}] is {cols['start_times'][j]!r}")
        # A closed loop's semaphore wait is no lag (module docstring).
        queue = 0.0 if closed else common.as_float(cols["queue_times"][j]) or 0.0
        latency = common.as_float(cols["latencies"][j]) or 0.0
        error = cols["errors"][j]
        rec = RequestRecord(
            request_id=f"run{i + 1}-{j}", scheduled=sent - max(queue, 0.0), sent=sent, attempts=1
        )
        out_len = common.as_int(cols["output_lens"][j])
        rec.completion_tokens = out_len
        rec.prompt_tokens = common.as_int(cols["input_lens"][j])
        rec.ok = not error and latency > 0
        if rec.ok:
            rec.end = sent + latency
            ttft = common.as_float(cols["ttfts"][j])
            if ttft is not None and ttft > 0:
                t = sent + ttft
                times = [t]
                gaps = cols["itls"][j]
                for g in gaps if isinstance(gaps, list) else []:
                    t += common.as_float(g) or 0.0
                    times.append(t)
                rec.chunk_times, rec.chunk_tokens = times, [1] * len(times)
                if out_len is not None and out_len > 1:
                    tpots.append((latency - ttft) / (out_len - 1))
            rec.status = 200
        else:
            rec.error = "ServerError"
            rec.error_message = str(error or "failed (vLLM saved no reason)")[:300]
        records.append(rec)
    return records, tpots
