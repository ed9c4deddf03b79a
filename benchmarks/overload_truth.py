"""Truth at saturation (issue 10): what bench reports against what the server measured.

A fake engine with N slots and a fixed service time (capacity = N / service time) runs
in its own process and records every request's true wait for a slot. bench offers it
a multiple of its capacity (open loop), and a small closed-loop run; the script prints,
side by side, the reported and the true TTFT p99, capacity and throughput, with ratios
(1.00 = exact), and the verdict bench gave.

    .venv/bin/python benchmarks/overload_truth.py [--quick]

Default: 4 slots x 240 ms (16.7 req/s) offered 33 req/s for 10 s (issue 10's case).
``--quick``: 2 slots x 120 ms (16.7 req/s) offered 33 req/s for 6 s.
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from infersight.bench import BenchConfig
from infersight.core.records import RunResult
from infersight.entrypoints.bench import bench_and_diagnose
from infersight_testkit import FakeConfig, FakeOpenAI


def _truth(srv: Any, result: RunResult) -> np.ndarray:
    t0 = min(r.scheduled for r in result.records)
    lines = np.array(srv.stats()["timelines"])
    return lines[lines[:, 0] >= t0]


def _bench(url: str, **kw: Any) -> RunResult:
    cfg = BenchConfig(url=url, max_tokens=1, input_tokens="fixed:8", progress=False, **kw)
    return bench_and_diagnose(cfg)


def _ratio(reported: float | None, true: float) -> str:
    return "-" if reported is None or not true else f"{reported / true:.2f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a smaller scenario (~30 s)")
    args = ap.parse_args()
    slots, service, duration = (2, 0.12, 6.0) if args.quick else (4, 0.24, 10.0)
    capacity = slots / service
    rate = round(2 * capacity)
    con = Console()
    con.print(
        f"fake engine: {slots} slots x {service * 1e3:.0f} ms = {capacity:.1f} req/s; "
        f"offered {rate} req/s for {duration:g} s, then c=8 with 8 requests"
    )
    table = Table("scenario", "figure", "reported", "true", "reported / true")
    cfg = FakeConfig(ttft=service, tokens=1, slots=slots, metrics_dialect="vllm")
    with FakeOpenAI.subprocess(cfg) as srv:
        over = _bench(srv.base_url, rate=[float(rate)], duration=duration)
        truth = _truth(srv, over)
        (name,) = over.aggregates
        a = over.aggregates[name]
        waits = truth[:, 1] - truth[:, 0]
        true_ttft99 = float(np.percentile(waits + service, 99))
        sus = a["sustainability"]
        rows = [
            ("TTFT p99 (s)", a["ttft"]["p99"], true_ttft99),
            ("  vs true queue wait p99 (s)", a["ttft"]["p99"], float(np.percentile(waits, 99))),
            ("capacity estimate (req/s)", sus["capacity_estimate"], capacity),
            ("requests in the statistics", a["requests"]["in_window"], len(truth)),
        ]
        for fig, rep, true in rows:
            table.add_row(f"r={rate} (2x)", fig, f"{rep:.3g}", f"{true:.3g}", _ratio(rep, true))
        verdicts = sorted({v.id for v in over.diagnosis if v.level == name})
        srv.reset()
        small = _bench(srv.base_url, concurrency=[8], requests=8)
        t = _truth(srv, small)
        s = small.aggregates["c=8"]
        true_tput = len(t) / (t[:, 2].max() - t[:, 0].min())
        table.add_row(
            "c=8, 8 requests",
            "throughput (req/s)",
            f"{s['request_throughput']:.3g}",
            f"{true_tput:.3g}",
            _ratio(s["request_throughput"], true_tput),
        )
        table.add_row(
            "c=8, 8 requests",
            "TTFT samples",
            str(s["ttft"]["count"]),
            str(len(t)),
            _ratio(s["ttft"]["count"], len(t)),
        )
    con.print(table)
    state = "unsustainable" if sus["sustainable"] is False else "sustainable"
    con.print(f"r={rate}: judged {state}; verdicts: {', '.join(verdicts) or '-'}")
    con.print(f"c=8: {s['window']['note'] or s['window']['method']}")


if __name__ == "__main__":
    main()
