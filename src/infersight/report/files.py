"""File outputs: the RunResult JSON with its schema, the CSV of records, any JSON or text.

Every file is written to a temporary name and renamed into place, so an interrupted
write never leaves half a file behind. A client-limited run's CSV starts with a
``#`` comment line that says so (the JSON has ``client_limited`` at its top).
"""

from __future__ import annotations

import csv
import os
from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel

from infersight.core.atomic import write_atomic
from infersight.core.records import RequestRecord, RunResult, save_run_result
from infersight.report.console import headline

__all__ = ["CSV_FIELDS", "write_bytes", "write_csv", "write_json", "write_outputs", "write_text"]

CSV_FIELDS = (
    "request_id",
    "level",
    "worker",
    "ok",
    "error",
    "cancelled",
    "status",
    "scheduled",
    "sent",
    "first_chunk",
    "end",
    "schedule_lag",
    "ttft",
    "ttft_from_sent",
    "e2e",
    "e2e_from_sent",
    "tpot",
    "itl_mean",
    "n_chunks",
    "prompt_tokens",
    "completion_tokens",
    "cached_tokens",
    "tokens_estimated",
    "usage_mismatch",
    "queue_delay",
    "attempts",
    "resends",
    "finish_reason",
    "error_message",
)


def write_bytes(path: str | Path, data: bytes) -> Path:
    """Write ``data`` atomically (temp file + rename); creates the parent folders."""
    return write_atomic(path, data)


def write_text(path: str | Path, text: str) -> Path:
    """Write UTF-8 ``text`` atomically."""
    return write_bytes(path, text.encode("utf-8"))


def write_json(path: str | Path, doc: BaseModel | Any) -> Path:
    """Write a pydantic model or plain JSON data, indented, atomically."""
    if isinstance(doc, BaseModel):
        doc = doc.model_dump(mode="json")
    return write_bytes(path, orjson.dumps(doc, option=orjson.OPT_INDENT_2))


def _csv_row(r: RequestRecord) -> list[Any]:
    row = {
        **r.to_dict(),
        "level": r.labels.get("level"),
        "worker": r.labels.get("worker", "0"),
        "first_chunk": r.chunk_times[0] if r.chunk_times else None,
        "schedule_lag": r.schedule_lag,
        "ttft": r.ttft,
        "ttft_from_sent": r.ttft_from_sent,
        "e2e": r.e2e,
        "e2e_from_sent": r.e2e_from_sent,
        "tpot": r.tpot,
        "itl_mean": r.itl_mean,
        "n_chunks": len(r.chunk_times),
    }
    return ["" if row.get(k) is None else row[k] for k in CSV_FIELDS]


def write_csv(result: RunResult, path: str | Path) -> Path:
    """One row per request with its derived metrics (seconds), headed by the banner."""
    p = Path(path)
    tmp = p.with_name(f".{p.name}.{os.getpid()}.tmp")
    with tmp.open("w", newline="") as f:
        w = csv.writer(f)
        head = headline(result)
        if head is not None:
            # A comment line, written raw: csv quoting would hide the leading '#'.
            f.write("# " + " ".join(head.split()) + "\n")
        w.writerow(CSV_FIELDS)
        w.writerows(_csv_row(r) for r in result.records)
    tmp.replace(p)
    return p


def write_outputs(
    result: RunResult, out_dir: str | Path, *, json_name: str | None = None
) -> dict[str, Path]:
    """``result.json`` (validated by reloading), ``records.csv`` and ``schema.json``.

    ``json_name`` names the RunResult file instead (vLLM's ``--result-filename``); its
    CSV is then named after it (``NAME.csv``), so several runs can share a folder.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    json_path = out / (json_name or "result.json")
    paths = {"json": save_run_result(result, json_path)}
    RunResult.from_json_bytes(paths["json"].read_bytes())  # must load back cleanly
    paths["schema"] = write_json(out / "schema.json", RunResult.model_json_schema())
    csv_name = f"{json_path.stem}.csv" if json_name else "records.csv"
    paths["csv"] = write_csv(result, json_path.parent / csv_name)
    return paths
