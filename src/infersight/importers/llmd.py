"""llm-d-benchmark's benchmark report (BR), 0.1 and 0.2.x, in JSON or YAML, loaded and
validated by the format's own package (``llmd_benchmark_report``).

A report describes one load point, so each file is one level. Its figures are the
harness's aggregates; a 0.2 report whose time series hold one point per request (as
``infersight bench --format llm-d`` writes them) gives request records, and its
engine series give telemetry samples, so ``diagnose`` reaches a full verdict. Any
other report (0.1, the package's converters' output) has aggregates only, and
``diagnose`` names what is missing (docs/design.md section 10). The reports of one run
share ``run.eid``; :func:`merge_reports` joins them into one run of several levels.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import yaml
from pydantic import ValidationError

import infersight.importers.common as common
from infersight.core.records import RunResult
from infersight.importers.llmd_series import UNIT_SECONDS, engine_samples, requests_from_series
from infersight.importers.tool_stats import aggregate_from_stats

__all__ = ["FORMAT", "LABEL", "looks_like", "merge_reports", "parse", "read"]

FORMAT = "llmd"
LABEL = "llm-d benchmark report"
_VERSIONS = ("0.1", "0.2", "0.2.1")
_RERUN = (
    "write it with infersight bench --format llm-d (each request kept as a time-series "
    "point), or diagnose the harness's own per-request output"
)


def _version(doc: Any) -> str | None:
    v = doc.get("version") if isinstance(doc, dict) else None
    if isinstance(v, float):  # YAML reads an unquoted 0.1 as a number
        v = str(v)
    return v if v in _VERSIONS else None


def looks_like(doc: Any) -> bool:
    """A BR document: its version, and ``scenario``/``metrics`` (0.1) or
    ``run``/``results`` (0.2)."""
    if _version(doc) is None:
        return False
    return ("scenario" in doc and "metrics" in doc) or ("run" in doc and "results" in doc)


def parse(data: bytes) -> Any:
    """The document, from JSON or else YAML; Malformed when it is neither."""
    try:
        return common.load_json(data)
    except common.Malformed as as_json:
        if data.lstrip()[:1] in (b"{", b"["):
            raise as_json from None
    try:
        return yaml.load(data, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or type(e).__name__
        raise common.Malformed(f"not valid JSON or YAML{where}: {problem}") from None


def _validated(doc: dict[str, Any]) -> Any:
    """The package's model of the report; its first complaint as one Malformed line."""
    # Here, not at the top: it adds ~0.4 s to every command that reads a result file.
    from llmd_benchmark_report import load_benchmark_report

    doc = {**doc, "version": _version(doc)}
    try:
        return load_benchmark_report(doc)
    except ValidationError as e:
        first = e.errors()[0]
        loc = ".".join(str(x) for x in first["loc"])
        more = f" (and {e.error_count() - 1} more)" if e.error_count() > 1 else ""
        raise common.Malformed(f"the package refuses it: {loc}: {first['msg']}{more}") from None


def _stats(stats: Any, count: int | None) -> tuple[dict[str, Any], float]:
    """A report's Statistics as (its values, the scale of its unit to seconds), counted
    over ``count`` requests (the answered ones: the format keeps no count)."""
    if stats is None:
        return {}, 1.0
    values = stats.model_dump(exclude_none=True)
    if count is not None:
        values["count"] = count
    return values, UNIT_SECONDS.get(str(values.pop("units")), 1.0)


def _target(conc: Any, rate: Any) -> tuple[int | None, float | None]:
    c = common.as_int(conc)
    r = common.as_float(rate)
    return (c, None) if c else (None, r if r and r > 0 else None)


def _point(conc: int | None, rate: float | None, unknown: str) -> str:
    """The level's name as bench gives it (``c=4``, ``r=2.5``); ``unknown`` when the
    report names neither (its harness's converter did not find them)."""
    return common.level_name(conc, rate) if conc is not None or rate is not None else unknown


def _level_v01(rep: Any) -> tuple[common.ImportedLevel, common.ImportSpec]:
    load, m = rep.scenario.load, rep.metrics
    args = load.args or {}
    meta = load.metadata if isinstance(load.metadata, dict) else {}
    conc, rate = _target(args.get("concurrency", args.get("max_concurrency")), args.get("rate"))
    name = _ours(rep).get("level") or _point(conc, rate, "unknown load")
    level = common.ImportedLevel(str(name), concurrency=conc, rate=rate)
    failures = m.requests.failures or 0
    lat, ok = m.latency, max(m.requests.total - failures, 0)
    level.aggregate = aggregate_from_stats(
        conc,
        rate,
        ok_count=ok,
        errors=failures,
        request_rate=m.throughput.requests_per_sec,
        token_rate=m.throughput.output_tokens_per_sec,
        latency={
            "ttft_from_sent": _stats(lat.time_to_first_token, ok),
            "tpot": _stats(lat.time_per_output_token, ok),
            "itl": _stats(lat.inter_token_latency, None),
            "e2e_from_sent": _stats(lat.request_latency, ok),
        },
    )
    tool = f"llm-d benchmark report of {meta.get('tool') or load.name}"
    spec = common.ImportSpec(
        format=FORMAT, tool=tool, source="", model=rep.scenario.model.name, notes=[]
    )
    spec.tool_version = (
        meta.get("tool_version") if isinstance(meta.get("tool_version"), str) else None
    )
    return level, spec


def _ours(rep: Any) -> dict[str, Any]:
    """What infersight wrote beside the format's fields (empty for another writer)."""
    if rep.version == "0.1":
        found = (rep.metadata or {}).get("infersight") if isinstance(rep.metadata, dict) else None
    else:
        obs = rep.results.observability
        found = (obs.model_extra or {}).get("infersight") if obs is not None else None
    return found if isinstance(found, dict) else {}


def _level_v02(rep: Any) -> tuple[common.ImportedLevel, common.ImportSpec, list[Any]]:
    load = rep.scenario.load if rep.scenario is not None else None
    std = load.standardized if load is not None else None
    conc, rate = _target(getattr(std, "concurrency", None), getattr(std, "rate_qps", None))
    obs = rep.results.observability
    name = _ours(rep).get("level") or _point(conc, rate, f"stage {getattr(std, 'stage', 0)}")
    level = common.ImportedLevel(str(name), concurrency=conc, rate=rate)
    perf = rep.results.request_performance
    level.records = requests_from_series(getattr(perf, "time_series", None), level.name)
    agg = getattr(perf, "aggregate", None)
    if not level.records and agg is not None:
        req, lat, thr = agg.requests, agg.latency, agg.throughput
        failures = (req.failures or 0) if req is not None else 0
        ok = None if req is None else max(req.total - failures, 0)
        level.aggregate = aggregate_from_stats(
            conc,
            rate,
            ok_count=ok,
            errors=failures,
            request_rate=getattr(getattr(thr, "request_rate", None), "mean", None),
            token_rate=getattr(getattr(thr, "output_token_rate", None), "mean", None),
            latency={
                "ttft_from_sent": _stats(getattr(lat, "time_to_first_token", None), ok),
                "tpot": _stats(getattr(lat, "time_per_output_token", None), ok),
                "itl": _stats(getattr(lat, "inter_token_latency", None), None),
                "e2e_from_sent": _stats(getattr(lat, "request_latency", None), ok),
            },
        )
    stack = (rep.scenario.stack if rep.scenario is not None else None) or []
    engines = [c for c in stack if c.standardized.kind == "inference_engine"]
    model = engines[0].standardized.model.name if engines else None
    spec = common.ImportSpec(
        format=FORMAT,
        tool=f"llm-d benchmark report of {std.tool if std is not None else 'a harness'}",
        source="",
        tool_version=str(std.tool_version) if std is not None else None,
        model=model,
    )
    samples = engine_samples(
        obs.components if obs is not None else None,
        str(engines[0].standardized.tool) if engines else "unknown",
    )
    return level, spec, samples


def read(data: bytes, source: str, fmt: str = FORMAT) -> RunResult:
    """The RunResult of one report: one level, with request records where its time
    series hold them."""
    doc = parse(data)
    if not looks_like(doc):
        raise common.Malformed(
            "no version 0.1/0.2/0.2.1 with scenario and metrics, or run and results"
        )
    rep = _validated(doc)
    samples: list[Any] = []
    if rep.version == "0.1":
        level, spec = _level_v01(rep)
    else:
        level, spec, samples = _level_v02(rep)
    spec.source = source
    spec.notes.append(f"benchmark report {rep.version}")
    if level.records:
        spec.missing.append(
            "each request's schedule lag (the report keeps one time a request, its intended send)"
        )
        spec.missing.append("each error's kind (the report keeps none)")
        spec.missing.append("the gaps between chunks within a request (the report keeps TPOT)")
    else:
        spec.missing.append(
            "per-request timings (the report holds aggregates only"
            + (
                ", and its time series are not one point a request)"
                if rep.version != "0.1"
                else ")"
            )
        )
        spec.rerun_hint = _RERUN
    if not samples:
        spec.missing.append("engine telemetry (running, waiting, KV usage)")
    result = common.build_run(spec, [level])
    result.samples = samples
    flag = _ours(rep).get("client_limited")
    if level.records and isinstance(flag, dict) and "flag" in flag:
        # infersight's own report: the level's flag as bench judged it (from each
        # request's lag and the load generator's CPU, which the format does not keep).
        result.aggregates[level.name]["client_limited"] = flag
    eid = getattr(getattr(rep, "run", None), "eid", None)
    result.config["imported"]["experiment"] = eid
    return result


def merge_reports(results: Sequence[tuple[str, RunResult]]) -> list[tuple[str, RunResult]]:
    """The reports of one run (the same ``run.eid``) joined into one run of several
    levels, in the order given; every other input as it is."""
    out: list[tuple[str, RunResult]] = []
    by_eid: dict[str, int] = {}
    for name, result in results:
        imported = result.config.get("imported") or {}
        eid = imported.get("experiment") if imported.get("format") == FORMAT else None
        if not isinstance(eid, str) or eid not in by_eid:
            if isinstance(eid, str):
                by_eid[eid] = len(out)
            out.append((name, result))
            continue
        i = by_eid[eid]
        first_name, first = out[i]
        joined = _join(first, result)
        if joined is None:
            out.append((name, result))  # the same level twice: kept apart
        else:
            out[i] = (f"{first_name} + {name}", joined)
    return out


def _join(a: RunResult, b: RunResult) -> RunResult | None:
    levels = [*a.config["levels"], *b.config["levels"]]
    if len({lv["name"] for lv in levels}) != len(levels):
        return None
    joined = a.model_copy(deep=True)
    joined.records = [*a.records, *b.records]
    seen = {(s.t, s.name) for s in a.samples}
    joined.samples = sorted(
        [*a.samples, *(s for s in b.samples if (s.t, s.name) not in seen)], key=lambda s: s.t
    )
    joined.aggregates = {**a.aggregates, **b.aggregates}
    joined.config["levels"] = levels
    imp = joined.config["imported"]
    imp["source"] = f"{imp['source']} + {b.config['imported']['source']}"
    imp["requests"] = len(joined.records)
    first = min((r.scheduled for r in joined.records), default=joined.clock.monotonic)
    joined.clock.monotonic, joined.clock.wall = first, first if first > 1e9 else 0.0
    return joined
