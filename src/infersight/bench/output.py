"""Bench outputs: the console table, the RunResult JSON, the CSV of records.

A client-limited run says so first, in every output: the banner above the table,
``RunResult.client_limited`` at the top of the JSON, and the first line of the CSV's
companion summary.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any

from infersight.core.metrics import client_headline, level_notes, level_state
from infersight.core.records import RunResult, save_run_result

__all__ = ["headline", "render", "write_outputs"]

CSV_FIELDS = (
    "request_id", "level", "worker", "ok", "error", "cancelled", "status", "scheduled",
    "sent", "first_chunk", "end", "schedule_lag", "ttft", "ttft_from_sent", "e2e",
    "e2e_from_sent", "tpot", "itl_mean", "n_chunks", "prompt_tokens", "completion_tokens",
    "tokens_estimated", "usage_mismatch", "queue_delay", "attempts", "resends", "finish_reason",
    "error_message",
)  # fmt: skip


def _ms(s: dict[str, Any] | None, key: str) -> str:
    v = None if s is None else s.get(key)
    if v is None:
        return "-"
    ms = v * 1e3
    return f"{ms:.0f}" if ms >= 100 else f"{ms:.1f}"


def _num(v: float | None, fmt: str = ".2f") -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, fmt)


def headline(result: RunResult) -> str | None:
    """The line every output starts with when the client may have limited the run."""
    head = client_headline(result)
    return None if head is None else f"{head[0]}: {head[1]}"


def render(result: RunResult, console: Any) -> None:
    """Print the banner, one table row per level, cost, find-max and diagnosis."""
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    head = client_headline(result)
    if head is not None:
        console.print(f"[bold red]{head[0]}:[/] {head[1]}", highlight=False)
    if result.partial:
        console.print("[bold yellow]PARTIAL:[/] the run was interrupted; results are partial")
    differ = any(
        a["requests"]["in_window"] != a["requests"]["total"] for a in result.aggregates.values()
    )
    cols = ("req/s", "tok/s", "ok/sent", *(("in stats",) if differ else ()), "state",
            "TTFT p50/p99", "TPOT p50", "ITL p50/p99", "e2e p50/p99", "lag p99", "goodput")  # fmt: skip
    rows: dict[str, list[str]] = {}
    for name, a in result.aggregates.items():
        req = a["requests"]
        flag = " [red]![/]" if a["client_limited"]["flag"] else ""
        rows[name + flag] = [
            _num(a["request_throughput"]),
            _num(a["output_token_throughput"], ".1f"),
            f"{req['ok']}/{req['total']}",
            *((str(req["in_window"]),) if differ else ()),
            "[bold red]UNSUSTAINABLE[/]" if (st := level_state(a)) == "unsustainable" else st,
            f"{_ms(a['ttft'], 'p50')}/{_ms(a['ttft'], 'p99')}",
            _ms(a["tpot"], "p50"),
            f"{_ms(a['itl'], 'p50')}/{_ms(a['itl'], 'p99')}",
            f"{_ms(a['e2e'], 'p50')}/{_ms(a['e2e'], 'p99')}",
            _ms(a["schedule_lag"], "p99"),
            _num(a["goodput"]),
        ]
    title = f"infersight bench · {result.config.get('model', '')}"
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    # One row per level when it fits; on a narrow terminal, one row per metric.
    wide = sum(max(len(c), 9) + 3 for c in cols) + max((len(n) for n in rows), default=5) + 3
    if console.width >= wide or len(rows) > 6:
        table.add_column("level", no_wrap=True)
        for col in cols:
            table.add_column(col, justify="right", no_wrap=True)
        for name, cells in rows.items():
            table.add_row(name, *cells)
    else:
        table.add_column("metric", no_wrap=True)
        for name in rows:
            table.add_column(name, justify="right", no_wrap=True)
        for i, col in enumerate(cols):
            table.add_row(col, *(cells[i] for cells in rows.values()))
    console.print(table)
    console.print(
        "[dim]times in ms; TTFT and e2e from the intended send time; ITL pooled; latency "
        "over the requests sent in each level's window (in stats), throughput over its "
        "completions until the window's requests drained[/]"
    )
    for name, a in result.aggregates.items():
        for kind, text in level_notes(name, a):
            style = "bold red" if kind == "unsustainable" else "dim"
            console.print(f"[{style}]{escape(text)}[/]", highlight=False)
    for name, a in result.aggregates.items():
        errs = a["errors_by_type"]
        if errs:
            parts = [f"{k} x{v['count']} (e.g. {v['example']})" for k, v in errs.items()]
            console.print(f"[red]errors in {name}:[/] " + "; ".join(parts))
    cost = result.cost
    price = (cost or {}).get("price_per_million") or {}
    if cost and (price.get("input") or price.get("output")):
        console.print(
            f"cost: ${cost['usd']:.4g} for the run, "
            f"${_num(cost['usd_per_million_output_tokens'], '.4g')} per million output tokens"
        )
        for name, c in cost["levels"].items():
            if c["projected_usd_per_day"] is not None:
                console.print(f"  {name}: ${c['projected_usd_per_day']:.4g}/day at this throughput")
    fm = result.config.get("find_max")
    if fm:
        ans = fm["max_rate"]
        console.print(
            f"[bold]find-max:[/] highest sustainable rate meeting {fm['slo']}: "
            + ("none of the rates tried" if ans is None else f"{ans:.3g} req/s")
        )
    for v in result.diagnosis:
        console.print(f"[bold]{v.title or v.id}[/]: {v.summary}")
    for note in result.notes:
        console.print(f"[dim]note: {note}[/]")


def write_outputs(result: RunResult, out_dir: str | Path) -> dict[str, Path]:
    """``result.json`` (validated by reloading), ``records.csv`` and ``schema.json``."""
    import orjson

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": save_run_result(result, out / "result.json")}
    RunResult.from_json_bytes(paths["json"].read_bytes())  # must load back cleanly
    schema = out / "schema.json"
    schema.write_bytes(orjson.dumps(RunResult.model_json_schema(), option=orjson.OPT_INDENT_2))
    paths["schema"] = schema
    csv_path = out / "records.csv"
    tmp = csv_path.with_suffix(".csv.tmp")
    with tmp.open("w", newline="") as f:
        w = csv.writer(f)
        head = headline(result)
        if head is not None:
            # A comment line, written raw: csv quoting would hide the leading '#'.
            f.write("# " + " ".join(head.split()) + "\n")
        w.writerow(CSV_FIELDS)
        for r in result.records:
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
            w.writerow(["" if row.get(k) is None else row[k] for k in CSV_FIELDS])
    tmp.replace(csv_path)
    paths["csv"] = csv_path
    return paths
