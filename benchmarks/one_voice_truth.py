"""One voice against the truth: every case of ``infersight_testkit.one_voice_truth``
(slots, KV reserved at admission, KV on demand with preemption, a compute knee, mixed
prompts, errors; open and closed loop; one level and many) benched on its fake server,
and a table: the recommendation's verdict, limiter, knob and fix knob, whether they
agree and name the constraint that binds. Then the KV what-if of issue 44: the
max_tokens-80 run predicted at max_tokens 20 and c=16, against the server measured
there (within 10% throughput and 15% TTFT/TPOT p50, or "not checked" with a range
that holds the measurement).

    .venv/bin/python benchmarks/one_voice_truth.py [--only NAME,...]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

from infersight.bench import BenchConfig
from infersight.core.records import RunResult, load_run_result, save_run_result
from infersight.diagnose.one_voice import spoken_once
from infersight.entrypoints.bench import bench_and_diagnose
from infersight.servermodel.predict import forecast
from infersight_testkit import FakeOpenAI
from infersight_testkit.one_voice_truth import CASES, Case


def run_case(case: Case) -> RunResult:
    """Start the case's fake server, bench it with diagnosis, return the run."""
    with FakeOpenAI.subprocess(case.server) as srv:
        cfg = BenchConfig(
            url=srv.base_url, progress=False, diagnose=True, sample_interval=0.25, **case.load
        )
        return bench_and_diagnose(cfg)


def _measured(run: RunResult, level: str) -> dict[str, float | None]:
    a = run.aggregates[level]
    return {
        "throughput": a.get("request_throughput"),
        "ttft_p50": (a.get("ttft") or {}).get("p50"),
        "tpot_p50": (a.get("tpot") or {}).get("p50"),
    }


def what_if(runs: dict[str, RunResult], console: Console) -> None:
    """Predict kv_reserved (max_tokens 80) at max_tokens 20, c=16; compare."""
    base, truth = runs.get("kv_reserved"), runs.get("kv_reserved_one_level")
    if base is None or truth is None:
        return
    with tempfile.TemporaryDirectory() as tmp:
        path = save_run_result(base, Path(tmp) / "run.json")
        fc = forecast(load_run_result(path), max_tokens=20, concurrency=16)
    got = _measured(truth, "c=16")
    t = Table(title="KV what-if: the max_tokens-80 run at max_tokens 20, c=16")
    for col in ("figure", "predicted", "measured", "error", "model error", "range", "holds"):
        t.add_column(col)
    limits = {"throughput": 0.10, "ttft_p50": 0.15, "tpot_p50": 0.15}
    for k, lim in limits.items():
        p, m = getattr(fc.prediction, k), got[k]
        err = abs(p - m) / m if p is not None and m else None
        lo, hi = fc.ranges.get(k, (None, None))
        inside = lo is not None and hi is not None and m is not None and lo <= m <= hi
        within = err is not None and err <= lim
        t.add_row(
            k,
            f"{p:.4g}" if p is not None else "-",
            f"{m:.4g}" if m is not None else "-",
            f"{err:.0%}" if err is not None else "-",
            "not checked" if fc.error.get(k) is None else f"{fc.error[k]:.0%}",
            f"{lo:.4g}–{hi:.4g}" if lo is not None and hi is not None else "-",
            "yes" if within or inside else "NO",
        )
    console.print(t)
    console.print(f"running: predicted {fc.prediction.running:.1f}; {fc.checked_on}")


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--only", default="", help="comma-separated case names")
    ap.add_argument("--save", type=Path, default=None, help="folder for NAME.json runs")
    args = ap.parse_args()
    only = {n.strip() for n in args.only.split(",") if n.strip()}
    console = Console(width=200)
    t = Table(title="one voice: the recommendation against the binding constraint")
    for col in ("case", "binds", "verdict", "limiter", "knob", "fix knob", "one voice", "right"):
        t.add_column(col)
    runs: dict[str, RunResult] = {}
    right = 0
    cases = [c for c in CASES if not only or c.name in only]
    for case in cases:
        run = run_case(case)
        runs[case.name] = run
        if args.save is not None:
            args.save.mkdir(parents=True, exist_ok=True)
            save_run_result(run, args.save / f"{case.name}.json")
        rec = run.recommendation
        why = spoken_once(rec, run.diagnosis)
        ok = why is None and rec is not None and rec.limiter in case.binds
        right += ok
        fk = rec.fix.knob if rec is not None and rec.fix is not None else None
        t.add_row(
            case.name,
            "/".join(case.binds),
            rec.verdict if rec is not None else "-",
            str(rec.limiter if rec is not None else None),
            str(rec.knob if rec is not None else None),
            str(fk),
            why or "yes",
            "yes" if ok else "NO",
        )
        console.print(f"[dim]{case.name}: {rec.text if rec is not None else '-'}[/]")
    console.print(t)
    console.print(f"{right} of {len(cases)} right ({right / max(1, len(cases)):.0%})")
    what_if(runs, console)


if __name__ == "__main__":
    main()
