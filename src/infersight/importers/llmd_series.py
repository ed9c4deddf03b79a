"""A benchmark report 0.2's time series as request records and engine samples
(docs/design.md section 10).

A report keeps no request as such; ``report.llmd`` writes each request as one point of
each latency and throughput series, at its intended send time. Series read as
requests when the TTFT and request-latency series have a value at every point and the
same times point by point; series of per-interval statistics (a mean per minute) do
not, and the report then counts as aggregates only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from infersight.core.records import RequestRecord, Sample
from infersight.importers.common import Malformed

__all__ = ["UNIT_SECONDS", "engine_samples", "requests_from_series"]

#: The report's time units, in seconds.
UNIT_SECONDS = {"s": 1.0, "ms": 0.001, "s/token": 1.0, "ms/token": 0.001}
#: Engine gauges of the report's observability series -> our sample names.
_GAUGES = {
    "num_requests_running": "engine.requests_running",
    "num_requests_waiting": "engine.requests_waiting",
    "kv_cache_usage": "engine.kv_cache_usage",
}


def _points(data: Any, what: str) -> list[tuple[float, float | None]] | None:
    """A series as ``[(unix seconds, value in seconds or its unit), ...]``; None when
    the series is absent."""
    if data is None:
        return None
    scale = UNIT_SECONDS.get(str(data.units), 1.0)
    out = []
    for p in data.series:
        v = p.value
        if isinstance(v, bool) or not (v is None or isinstance(v, int | float)):
            raise Malformed(f"{what} has a point valued {v!r}, not a number")
        out.append((p.ts.timestamp(), None if v is None else float(v) * scale))
    return out


def _aligned(
    base: list[tuple[float, float | None]], other: list[tuple[float, float | None]] | None
) -> list[float | None]:
    if other is None or len(other) != len(base):
        return [None] * len(base)
    if any(abs(a[0] - b[0]) > 1e-6 for a, b in zip(base, other, strict=True)):
        return [None] * len(base)
    return [v for _, v in other]


def requests_from_series(time_series: Any, level: str) -> list[RequestRecord]:
    """The request records the report's series hold (none when they hold intervals)."""
    lat = getattr(time_series, "latency", None)
    thr = getattr(time_series, "throughput", None)
    if lat is None:
        return []
    ttft = _points(lat.time_to_first_token, "time_to_first_token")
    e2e = _points(lat.request_latency, "request_latency")
    if not ttft or e2e is None or len(ttft) != len(e2e):
        return []
    if any(abs(a[0] - b[0]) > 1e-6 for a, b in zip(ttft, e2e, strict=True)):
        return []  # not one point per request
    if all(v is None for _, v in e2e):
        return []  # per-interval statistics, no values
    tpot = _aligned(ttft, _points(lat.time_per_output_token, "time_per_output_token"))
    out_rate = _aligned(ttft, _points(getattr(thr, "output_token_rate", None), "output"))
    in_rate = _aligned(ttft, _points(getattr(thr, "input_token_rate", None), "input"))
    return [
        _record(f"{level}-{i}", t, first, e2e[i][1], tpot[i], out_rate[i], in_rate[i])
        for i, (t, first) in enumerate(ttft)
    ]


def _tokens(rate: float | None, e2e: float | None) -> int | None:
    return None if rate is None or e2e is None else max(round(rate * e2e), 0)


def _record(
    rid: str,
    scheduled: float,
    ttft: float | None,
    e2e: float | None,
    tpot: float | None,
    out_rate: float | None,
    in_rate: float | None,
) -> RequestRecord:
    """One request: sent at its intended time (the report keeps one time), its chunks
    spread evenly from the first token at its TPOT (one token each). A request without
    a TTFT or a latency, or with no output tokens, failed."""
    rec = RequestRecord(request_id=rid, scheduled=scheduled, sent=scheduled, attempts=1)
    rec.prompt_tokens = _tokens(in_rate, e2e)
    if e2e is not None:
        rec.end = scheduled + e2e
    n = _tokens(out_rate, e2e)
    if ttft is None or e2e is None or n == 0:
        rec.error = "ServerError"
        rec.error_message = "failed (the benchmark report keeps no reason)"
        rec.completion_tokens = 0
        return rec
    if n is None:
        n = 1 + round((e2e - ttft) / tpot) if tpot and tpot > 0 else 1
    first = scheduled + ttft
    step = tpot if tpot is not None and n >= 2 else 0.0
    rec.chunk_times = [first + step * k for k in range(max(n, 1) if step else 1)]
    rec.chunk_tokens = [1] * len(rec.chunk_times)
    if not step and n > 1:
        rec.chunk_tokens = [n]
    rec.completion_tokens = n
    rec.ok, rec.status = True, 200
    return rec


def engine_samples(components: Sequence[Any] | None, engine: str) -> list[Sample]:
    """The engine's gauges of the report's observability series, as telemetry samples."""
    out: list[Sample] = []
    for comp in components or []:
        series = getattr(comp, "time_series", None)
        if series is None:
            continue
        for theirs, ours in _GAUGES.items():
            data = getattr(series, theirs, None)
            if data is None:
                continue
            scale = 0.01 if theirs == "kv_cache_usage" and str(data.units) == "percent" else 1.0
            for p in data.series:
                if isinstance(p.value, int | float) and not isinstance(p.value, bool):
                    out.append(
                        Sample(
                            t=p.ts.timestamp(),
                            name=ours,
                            value=float(p.value) * scale,
                            labels={"engine": engine, "source": "llm-d report"},
                        )
                    )
    return sorted(out, key=lambda s: s.t)
