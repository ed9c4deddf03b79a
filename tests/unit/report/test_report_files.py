"""Outputs: console table with the client-limited banner, CSV, JSON."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from rich.console import Console

from infersight.core.records import RequestRecord, RunResult, load_run_result
from infersight.report import render_console, write_outputs
from infersight.stats.aggregate import aggregate


def _result(lag: float) -> RunResult:
    recs = []
    for i in range(10):
        s = i * 0.5
        recs.append(
            RequestRecord(
                f"c=2-{i}",
                s,
                sent=s + lag,
                headers=s + 0.01,
                chunk_times=[s + 0.05, s + 0.06],
                chunk_tokens=[1, 1],
                end=s + 0.06,
                status=200,
                ok=True,
                prompt_tokens=100,
                completion_tokens=2,
                labels={"level": "c=2"},
            )
        )
    agg = aggregate(recs)
    r = RunResult(records=recs, aggregates={"c=2": agg}, config={"model": "m"})
    r.client_limited = agg["client_limited"]["flag"]
    r.client_limited_reasons = agg["client_limited"]["reasons"]
    return r


def test_client_limited_banner_is_first_in_every_output(tmp_path: Path) -> None:
    r = _result(lag=0.02)
    buf = io.StringIO()
    render_console(r, Console(file=buf, width=200))
    text = buf.getvalue()
    assert text.startswith("CLIENT-LIMITED")
    paths = write_outputs(r, tmp_path)
    assert paths["csv"].read_text().startswith("# CLIENT-LIMITED")
    doc = json.loads(paths["json"].read_text())
    assert doc["client_limited"] is True and doc["client_limited_reasons"]
    assert load_run_result(paths["json"]).records[0].request_id == "c=2-0"


def test_csv_has_one_row_per_record_with_derived_metrics(tmp_path: Path) -> None:
    r = _result(lag=0.001)
    paths = write_outputs(r, tmp_path)
    rows = list(csv.DictReader(paths["csv"].open()))
    assert len(rows) == 10
    assert abs(float(rows[0]["ttft"]) - 0.05) < 1e-9
    assert rows[0]["level"] == "c=2" and rows[0]["ok"] == "True"
