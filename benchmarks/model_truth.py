"""Ground truth for the performance model: real bench runs against servers whose
true limits are known (``infersight_testkit.truth_scenarios``).

Each scenario's fake server runs in its own process on 127.0.0.1; bench offers it the
scenario's load; the RunResult is saved as ``DIR/NAME.json`` and every scenario's true
limits (slots, KV capacity, compute knee, step times, error rate, capacity, expected
limiter) go to ``DIR/truth.json``. The ``engine_parallel_P`` scenarios run the embedded
engine (llama.cpp on this machine's CPU) at ``--parallel P``: only its slots are known.
A table per level follows: throughput, TTFT p50, TPOT p50 and mean requests in flight
(the client's, and the engine's running count).

    .venv/bin/python benchmarks/model_truth.py --save /tmp/truth [--only NAME,...] [--quick]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
from rich.console import Console
from rich.table import Table

from infersight.bench import BenchConfig
from infersight.core.records import RunResult, save_run_result
from infersight.entrypoints.bench import bench_and_diagnose
from infersight_testkit import FakeOpenAI
from infersight_testkit.truth_scenarios import SCENARIOS, Scenario, write_trace


def run_scenario(sc: Scenario, *, quick: bool, scratch: Path) -> RunResult:
    """Start the scenario's server, run bench against it, and return the RunResult."""
    load = sc.bench_load(quick=quick)
    if sc.trace:
        load["trace"] = str(write_trace(sc, scratch))
    if sc.server is None:  # bench starts the embedded engine itself (no url)
        return bench_and_diagnose(BenchConfig(progress=False, sample_interval=0.5, **load))
    with FakeOpenAI.subprocess(sc.server) as srv:
        cfg = BenchConfig(
            url=srv.base_url, progress=False, diagnose=True, sample_interval=0.5, **load
        )
        return bench_and_diagnose(cfg)


def level_rows(result: RunResult) -> list[dict[str, Any]]:
    """Per level: throughput, TTFT p50, TPOT p50 and mean in flight, from the run."""
    points = {p.level: p for p in (result.capacity_curve.points if result.capacity_curve else [])}
    rows = []
    for name, a in result.aggregates.items():
        p = points.get(name)
        cl = a.get("client_limited") or {}
        rows.append(
            {
                "level": name,
                "throughput": a.get("request_throughput"),
                "ttft_p50": (a.get("ttft") or {}).get("p50"),
                "tpot_p50": (a.get("tpot") or {}).get("p50"),
                "client_inflight": p.client_inflight if p else None,
                "engine_running": p.inflight if p and p.inflight_source == "engine" else None,
                "errors": (a.get("requests") or {}).get("errors"),
                "client_limited": bool(cl.get("flag")),
            }
        )
    return rows


def _f(v: Any, scale: float = 1.0, fmt: str = ".3g") -> str:
    return "-" if v is None else format(v * scale, fmt)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--save", required=True, type=Path, help="folder for NAME.json, truth.json")
    ap.add_argument("--only", default="", help="comma-separated scenario names")
    ap.add_argument("--quick", action="store_true", help="shorter levels")
    args = ap.parse_args()
    only = {n.strip() for n in args.only.split(",") if n.strip()}
    known = {s.name for s in SCENARIOS}
    if only - known:
        ap.error(f"unknown scenarios {sorted(only - known)}; known: {', '.join(sorted(known))}")
    picked = [s for s in SCENARIOS if not only or s.name in only]
    args.save.mkdir(parents=True, exist_ok=True)
    truth_path = args.save / "truth.json"
    truth: dict[str, Any] = orjson.loads(truth_path.read_bytes()) if truth_path.exists() else {}
    con = Console(width=140)
    failed: list[str] = []
    table = Table(
        "scenario",
        "level",
        "X req/s",
        "TTFT p50 ms",
        "TPOT p50 ms",
        "in flight (client)",
        "running (engine)",
        "failed",
        "client-limited",
    )
    with tempfile.TemporaryDirectory() as tmp:
        for sc in picked:
            t0 = time.monotonic()
            try:
                result = run_scenario(sc, quick=args.quick, scratch=Path(tmp))
            except Exception as e:  # one broken scenario must not lose the others' runs
                con.print(f"[red]{sc.name}: {type(e).__name__}: {e}[/]")
                failed.append(sc.name)
                continue
            save_run_result(result, args.save / f"{sc.name}.json")
            truth[sc.name] = {**sc.truth(), "quick": args.quick}
            # written after every scenario, so an interrupted run keeps what it has
            truth_path.write_bytes(orjson.dumps(truth, option=orjson.OPT_INDENT_2))
            con.print(f"{sc.name}: {time.monotonic() - t0:.0f} s")
            for r in level_rows(result):
                table.add_row(
                    sc.name,
                    r["level"],
                    _f(r["throughput"]),
                    _f(r["ttft_p50"], 1e3),
                    _f(r["tpot_p50"], 1e3),
                    _f(r["client_inflight"]),
                    _f(r["engine_running"]),
                    _f(r["errors"], fmt="g"),
                    "yes" if r["client_limited"] else "",
                )
    con.print(table)
    if failed:
        raise SystemExit(f"scenarios that did not run: {', '.join(failed)}")


if __name__ == "__main__":
    main()
