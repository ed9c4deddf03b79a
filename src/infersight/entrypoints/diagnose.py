"""``infersight diagnose`` as functions: read the runs (files, or what telemetry saw of a
live server) and print the verdicts of the offline, pure ``diagnose``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import orjson
from rich.console import Console

from infersight.client import resolve_api_key
from infersight.core.errors import ConfigError
from infersight.core.records import RunResult, Sample
from infersight.diagnose import diagnose_run
from infersight.importers import load_result, merge_reports, missing_evidence
from infersight.report import render_diagnosis
from infersight.report.llmd.writer import llmd_reports
from infersight.telemetry import read_samples, sample_url

if TYPE_CHECKING:
    from infersight.diagnose.physics import Device

__all__ = ["load_inputs", "print_diagnoses", "watch_url"]


def load_inputs(paths: list[Path]) -> list[tuple[str, RunResult]]:
    """RunResult files and other tools' results (importers.load_result) as they are,
    except llm-d benchmark reports of one run, joined into one; monitor recordings
    (JSONL) merged into one result."""
    results: list[tuple[str, RunResult]] = []
    samples: list[Sample] = []
    rec_names: list[str] = []
    for p in paths:
        try:
            with p.open("rb") as f:
                head = f.readline(4096)
        except OSError as e:
            raise ConfigError(f"{p}: cannot read ({e.strerror})") from None
        if b"infersight_samples" in head:
            s, _ = read_samples(p)
            samples.extend(s)
            rec_names.append(p.name)
        else:
            results.append((str(p), load_result(p)))
    results = merge_reports(results)
    if samples:
        engines = {s.labels.get("engine") for s in samples if s.name.startswith("engine.")}
        engines.discard(None)
        eng = next(iter(engines)) if len(engines) == 1 else "unknown"
        r = RunResult(kind="monitor", config={"engine": {"url": "", "engine": eng}})
        r.samples = sorted(samples, key=lambda s: s.t)
        results.append((" + ".join(rec_names), r))
    return results


def watch_url(
    url: str,
    seconds: float,
    *,
    api_key_env: str | None,
    probe: bool,
    interval: float,
    api_key_file: Path | None = None,
) -> list[tuple[str, RunResult]]:
    """What telemetry sees of a live server in ``seconds``, as the one input."""
    key = None
    if api_key_env or api_key_file:
        key = resolve_api_key(
            env=api_key_env, file=str(api_key_file) if api_key_file else None, required=True
        )
    return [(url, sample_url(url, seconds, api_key=key, probe=probe, interval=interval))]


def print_diagnoses(
    inputs: list[tuple[str, RunResult]],
    *,
    window: float | None = None,
    model: str | None = None,
    gpu: Device | None = None,
    engine_slots: int | None = None,
    as_json: bool = False,
    llmd: str | None = None,
) -> None:
    """Diagnose each input, storing its verdicts, capacity curve and recommendation in
    it (as ``bench`` does); print the level table, the run's fix and the verdict panels,
    or JSON (``{"recommendation", "capacity_curve", "verdicts"}`` per input), or with
    with ``llmd`` (a version) one JSON array of llm-d-benchmark reports, one per level of
    every input."""
    out: dict[str, dict[str, object]] = {}
    con = Console()
    for name, result in inputs:
        found = diagnose_run(
            result, window_seconds=window, model=model, gpu=gpu, engine_slots=engine_slots
        )
        if not found.verdicts:
            # another tool's aggregates alone: say what could not be decided
            found.verdicts = missing_evidence(result)
        result.diagnosis = found.verdicts
        result.capacity_curve, result.recommendation = found.curve, found.recommendation
        if found.advice is not None:
            result.server_model, result.self_check = found.advice.model, found.advice.check
        out[name] = {
            "recommendation": None
            if found.recommendation is None
            else found.recommendation.model_dump(mode="json"),
            "capacity_curve": None if found.curve is None else found.curve.model_dump(mode="json"),
            "server_model": None
            if result.server_model is None
            else result.server_model.model_dump(mode="json"),
            "self_check": None
            if result.self_check is None
            else result.self_check.model_dump(mode="json"),
            "verdicts": [v.model_dump(mode="json") for v in found.verdicts],
        }
        if not as_json and not llmd:
            render_diagnosis(result, found.verdicts, console=con, title=name)
    if llmd:
        reports = [rep.dump() for _, result in inputs for rep in llmd_reports(result, llmd)]
        sys.stdout.buffer.write(orjson.dumps(reports, option=orjson.OPT_INDENT_2) + b"\n")
    elif as_json:
        doc = out[inputs[0][0]] if len(inputs) == 1 else out
        sys.stdout.buffer.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n")
