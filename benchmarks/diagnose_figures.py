"""Figures for the diagnosis (issue 6), in one run:

1. the embedded engine's observed ITL at concurrency 1 and 16 against the roofline
   floor computed for this host's CPU (measured bandwidth and FLOP/s), as a ratio;
2. the time to diagnose a synthetic RunResult of 100,000 requests (and to load it
   from JSON), and, when infersight.report is installed, to render its HTML report.

    .venv/bin/python benchmarks/diagnose_figures.py [--quick]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from infersight.core.records import (
    RequestRecord,
    RunResult,
    Sample,
    load_run_result,
    save_run_result,
)
from infersight.diagnose import diagnose
from infersight.diagnose.physics import decode_floor, load_shape, measure_cpu


def itl_vs_floor(quick: bool) -> list[dict[str, float]]:
    """Bench the embedded engine at c=1 and c=16 and compare ITL with the CPU floor."""
    from infersight.bench import BenchConfig
    from infersight.entrypoints.bench import bench_and_diagnose

    cfg = BenchConfig(
        engine_parallel=16,
        engine_ctx=16 * 512,
        concurrency=[1, 16],
        duration=6.0 if quick else 20.0,
        max_tokens=32 if quick else 64,
        input_tokens="fixed:64",
        progress=False,
        diagnose=False,
        warmup="0",
        cooldown="0",
        sample_interval=0.5,
    )
    result = bench_and_diagnose(cfg)
    shape = load_shape("embedded")
    threads = int(result.config["engine"].get("threads") or 0)
    cpu = measure_cpu()
    cpu = cpu.with_cores(threads) if threads else cpu
    verdicts = diagnose(result)
    rows = []
    for level in ("c=1", "c=16"):
        agg = result.aggregates[level]
        itl = agg["itl"]["p50"]
        recs = [r for r in result.records if r.labels.get("level") == level and r.ok]
        ctx = float(np.mean([(r.prompt_tokens or 64) + r.output_tokens / 2 for r in recs]))
        batch = int(level.split("=")[1])
        f = decode_floor(shape, cpu, batch=batch, context=ctx)
        ids = sorted({v.id for v in verdicts if v.level == level})
        rows.append(
            {
                "level": level,
                "itl": itl,
                "floor": f.itl_s,
                "bw": f.bandwidth_s,
                "compute": f.compute_s,
                "ratio": itl / f.itl_s if itl else float("nan"),
                "tps": agg["output_token_throughput"],
                "n": agg["itl"]["count"],
                "verdicts": ", ".join(ids),
                "cpu": cpu.describe(),
            }
        )
    return rows


def synthetic(n: int) -> RunResult:
    """n requests from 64 closed-loop users against a vLLM-shaped server, 1 s samples."""
    rng = np.random.default_rng(1)
    users, out_tokens = 64, 16
    records: list[RequestRecord] = []
    t_user = np.full(users, 1000.0)
    for i in range(n):
        u = i % users
        t = float(t_user[u])
        first = t + 0.0003 + rng.uniform(0.03, 0.08)
        chunks = (first + np.cumsum(rng.uniform(0.009, 0.013, out_tokens - 1))).tolist()
        r = RequestRecord(
            request_id=f"r{i}",
            scheduled=t,
            sent=t + 0.0003,
            chunk_times=[first, *chunks],
            chunk_tokens=[1] * out_tokens,
            end=chunks[-1] + 0.0004,
            status=200,
            ok=True,
            finish_reason="length",
            prompt_tokens=512,
            completion_tokens=out_tokens,
            attempts=1,
            labels={"level": "c=64"},
        )
        records.append(r)
        t_user[u] = r.end or t
    t_end = float(t_user.max())
    samples: list[Sample] = []
    eng = {"engine": "vllm", "source": "http://10.0.0.5:8000/metrics"}
    for ts in np.arange(1000.0, t_end, 1.0):
        samples += [
            Sample(float(ts), "engine.requests_running", 64.0, eng),
            Sample(float(ts), "engine.requests_waiting", 0.0, eng),
            Sample(float(ts), "engine.kv_cache_usage", 0.2, eng),
            Sample(float(ts), "engine.slots", 256.0, eng),
            Sample(float(ts), "gpu.utilization", 0.93, {"gpu": "0"}),
            Sample(float(ts), "gpu.sm_activity", 0.55, {"gpu": "0"}),
        ]
    return RunResult(
        config={
            "levels": [{"name": "c=64", "concurrency": 64}],
            "engine": {"url": "http://10.0.0.5:8000", "engine": "vllm"},
            "physics": {"model": "embedded"},
        },
        environment={"gpus": [{"name": "NVIDIA H100 80GB HBM3"}]},
        records=records,
        samples=samples,
    )


def timing(n: int) -> list[tuple[str, float]]:
    out: list[tuple[str, float]] = []
    t0 = time.perf_counter()
    result = synthetic(n)
    out.append((f"build synthetic RunResult ({n:,} requests)", time.perf_counter() - t0))
    t0 = time.perf_counter()
    vs = diagnose(result)
    out.append((f"diagnose() -> {', '.join(v.id for v in vs)}", time.perf_counter() - t0))
    with tempfile.TemporaryDirectory() as d:
        path = save_run_result(result, Path(d) / "run.json")
        t0 = time.perf_counter()
        loaded = load_run_result(path)
        vs = diagnose(loaded)
        out.append(("load JSON + diagnose()", time.perf_counter() - t0))
        try:
            from infersight.report import render_html
        except ImportError:
            out.append(("render report (infersight.report not available)", float("nan")))
        else:
            loaded.diagnosis = vs
            t0 = time.perf_counter()
            html = render_html(loaded)
            out.append((f"render HTML report ({len(html) / 1e6:.1f} MB)", time.perf_counter() - t0))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="short engine runs (< 60 s)")
    ap.add_argument("--requests", type=int, default=100_000)
    ap.add_argument("--skip-engine", action="store_true")
    args = ap.parse_args()
    con = Console(width=160)
    if not args.skip_engine:
        rows = itl_vs_floor(args.quick)
        t = Table(title=f"embedded engine ITL vs CPU floor ({rows[0]['cpu']})")
        for c in (
            "level",
            "ITL p50 (ms)",
            "floor (ms)",
            "bw / compute floor (ms)",
            "ITL / floor",
            "out tok/s",
            "gaps",
            "verdicts",
        ):
            t.add_column(c)
        for r in rows:
            t.add_row(
                str(r["level"]),
                f"{r['itl'] * 1e3:.1f}",
                f"{r['floor'] * 1e3:.2f}",
                f"{r['bw'] * 1e3:.2f} / {r['compute'] * 1e3:.2f}",
                f"{r['ratio']:.1f}x",
                f"{r['tps']:.1f}",
                str(r["n"]),
                str(r["verdicts"]),
            )
        con.print(t)
    t = Table(title="time to diagnose")
    t.add_column("step")
    t.add_column("seconds", justify="right")
    for name, sec in timing(args.requests):
        t.add_row(name, f"{sec:.2f}")
    con.print(t)


if __name__ == "__main__":
    main()
