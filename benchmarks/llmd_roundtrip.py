"""llm-d benchmark reports: do ours load with the format's package, does a run written
as reports and read back keep its verdict and fix, and do the package's conversions of
the harnesses' results agree with the harnesses' own files?

1. **Ours.** infersight benches its fake server (4 slots, 8 slots, a compute knee at 4;
   three levels each) and diagnoses synthetic runs; every run is written as reports
   0.2.1 and 0.1 (``report.llmd``), each file loaded by ``llmd_benchmark_report``
   (goal: 100%), and the 0.2.1 reports read back (``importers.llmd``): the same verdict
   per level and the same fix (verdict, knob, direction, limiter, number, fitted slots).
2. **Converted.** GuideLLM, AIPerf, inference-perf and vLLM's benchmark measure the
   4-slot server at c=1, 4, 8; the package converts each setting's native file; both
   are read by infersight. They agree when the converted report gets the native file's
   verdict or, where the report drops the requests, the verdict that names what is
   missing ("undecided: per-request timings"); TTFT p50 and throughput are compared.

    .venv/bin/python benchmarks/llmd_roundtrip.py              # a few minutes
    .venv/bin/python benchmarks/llmd_roundtrip.py --vllm-python /path/to/vllm/bin/python
    .venv/bin/python benchmarks/llmd_roundtrip.py --skip-tools  # part 1 only
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
from pathlib import Path
from typing import Any

from llmd_benchmark_report import import_benchmark_report
from rich.console import Console
from rich.table import Table

from _llmd_tools import TOOLS, Setting, default_vllm_python
from infersight.bench import BenchConfig
from infersight.core.records import RunResult
from infersight.diagnose import diagnose_run
from infersight.entrypoints.bench import bench_and_diagnose
from infersight.entrypoints.diagnose import load_inputs
from infersight.importers import load_result, missing_evidence
from infersight.report.llmd.writer import write_llmd
from infersight_testkit.agreement import advice
from infersight_testkit.fake.openai import FakeConfig, FakeOpenAI
from infersight_testkit.synthetic_runs import make_run

SCENARIOS: list[tuple[str, dict[str, Any], list[int]]] = [
    ("4 slots", dict(slots=4), [1, 4, 8]),
    ("8 slots", dict(slots=8), [2, 8, 16]),
    ("compute knee 4", dict(compute_knee=4), [1, 4, 8]),
]
BASE = dict(ttft=0.05, itl=0.01, tokens=16, metrics_dialect="vllm")


def _verdicts(run: RunResult) -> dict[str, list[str]]:
    """Each level's verdict ids (``undecided`` for a file of aggregates alone)."""
    found = diagnose_run(run).verdicts or missing_evidence(run)
    out: dict[str, list[str]] = {name: [] for name in run.aggregates}
    for v in found:
        out.setdefault(v.level or "run", []).append(v.id)
    return {k: sorted(v) for k, v in out.items()}


def _roundtrip(name: str, run: RunResult, d: Path, table: Table) -> tuple[int, int, bool]:
    """(files written, files the package loads, verdict and fix kept) for one run."""
    paths = write_llmd(run, d / "v021") + write_llmd(run, d / "v01", version="0.1")
    loaded = 0
    for p in paths:
        try:
            import_benchmark_report(str(p))
            loaded += 1
        except Exception as e:  # counted, and shown
            print(f"{p}: the package refuses it: {str(e).splitlines()[0]}", file=sys.stderr)
    back = [r for _, r in load_inputs(write_llmd(run, d / "again"))]
    before, after = diagnose_run(run), diagnose_run(back[0])
    a, b = advice(before), advice(after)
    same_fix = dataclasses.replace(a, text="") == dataclasses.replace(b, text="")
    same_verdicts = len(back) == 1 and _verdicts(run) == _verdicts(back[0])
    ok = same_fix and same_verdicts
    fix = f"{a.verdict} {a.knob or ''} {a.number if a.number is not None else ''}".strip()
    table.add_row(
        name,
        f"{loaded}/{len(paths)}",
        "yes" if same_verdicts else "NO",
        fix,
        "yes" if ok else f"NO: {b.verdict} {b.knob} {b.number}",
    )
    return len(paths), loaded, ok


def _ours(args: argparse.Namespace, d: Path, con: Console) -> None:
    table = Table("run", "files loaded", "verdicts kept", "fix", "round trip")
    files = loaded = agree = runs = 0
    for name, server, levels in SCENARIOS:
        with FakeOpenAI.subprocess(FakeConfig(**BASE, **server)) as srv:
            run = bench_and_diagnose(
                BenchConfig(
                    url=srv.base_url,
                    concurrency=levels,
                    requests=args.requests,
                    max_tokens=16,
                    input_tokens="fixed:16",
                    progress=False,
                    diagnose=True,
                )
            )
        n, ok, same = _roundtrip(f"bench: {name}", run, d / name, table)
        files, loaded, agree, runs = files + n, loaded + ok, agree + same, runs + 1
    for seed in range(args.synthetic):
        run = make_run(
            1200, levels=(1, 4, 16), seed=seed, error_rate=0.02 * (seed % 2), gpu=bool(seed % 3)
        )
        n, ok, same = _roundtrip(f"synthetic #{seed}", run, d / f"syn{seed}", table)
        files, loaded, agree, runs = files + n, loaded + ok, agree + same, runs + 1
    con.print(table)
    con.print(
        f"our reports that load with llmd-benchmark-report: {loaded}/{files} "
        f"({100 * loaded / max(files, 1):.0f}%); round trip, same verdicts and fix: "
        f"{agree}/{runs}"
    )


def _level(run: RunResult, conc: int) -> str:
    name = f"c={conc}"
    return name if name in run.aggregates else next(iter(run.aggregates))


def _compare(s: Setting, table: Table) -> bool:
    native, conv = load_result(s.native), load_result(s.converted)
    nl, cl = _level(native, s.concurrency), next(iter(conv.aggregates))
    nv, cv = _verdicts(native).get(nl, []), _verdicts(conv).get(cl, [])
    named = "per-request timings" in " ".join(
        str(e.value) for v in missing_evidence(conv) for e in v.evidence
    )
    agree = cv == nv or (cv == ["undecided"] and named and bool(native.records))
    na, ca = native.aggregates[nl], conv.aggregates[cl]
    n_ttft = (na.get("ttft_from_sent") or {}).get("p50") or (na.get("ttft") or {}).get("p50")
    c_ttft = (ca.get("ttft") or {}).get("p50")

    def rel(a: Any, b: Any) -> str:
        return f"{100 * (b - a) / a:+.1f}%" if a and b is not None else "-"

    table.add_row(
        s.tool,
        f"c={s.concurrency}",
        ", ".join(nv) or "none",
        ", ".join(cv) or "none",
        "yes" if agree else "NO",
        f"{(n_ttft or 0) * 1000:.1f} ms",
        rel(n_ttft, c_ttft),
        rel(na.get("request_throughput"), ca.get("request_throughput")),
    )
    return agree


def _converted(args: argparse.Namespace, d: Path, con: Console) -> None:
    table = Table(
        "tool",
        "setting",
        "native verdict",
        "converted verdict",
        "agree",
        "TTFT p50 (native)",
        "TTFT Δ",
        "throughput Δ",
    )
    counts: dict[str, list[int]] = {}
    levels = [1, 4, 8]
    with FakeOpenAI.subprocess(FakeConfig(**BASE, slots=4)) as srv:
        for tool, (installed, runner) in TOOLS.items():
            if not installed(args.vllm_python):
                table.add_row(tool, "-", "not installed", "", "", "", "", "")
                continue
            folder = d / tool
            folder.mkdir(parents=True, exist_ok=True)
            try:
                settings = runner(srv.base_url, folder, levels, args.requests, args.vllm_python)
            except Exception as e:  # the package's converter, or the tool, failed
                table.add_row(
                    tool, "-", f"failed: {str(e).splitlines()[0][:80]}", "", "NO", "", "", ""
                )
                counts[tool] = [0, len(levels)]
                continue
            agree = [_compare(s, table) for s in settings]
            counts[tool] = [sum(agree), len(levels)]
    con.print(table)
    for tool, (a, n) in counts.items():
        con.print(f"{tool}: converted agrees with native in {a} of {n} settings")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=24, help="requests per level")
    ap.add_argument("--synthetic", type=int, default=6, help="synthetic runs to round-trip")
    ap.add_argument("--skip-tools", action="store_true", help="our reports only")
    ap.add_argument(
        "--vllm-python",
        type=Path,
        default=default_vllm_python(),
        help="a Python with vLLM installed, for vLLM's benchmark",
    )
    args = ap.parse_args()
    con = Console(width=150)
    with tempfile.TemporaryDirectory(prefix="llmd-roundtrip-") as tmp:
        _ours(args, Path(tmp) / "ours", con)
        if not args.skip_tools:
            _converted(args, Path(tmp) / "tools", con)
    return 0


if __name__ == "__main__":
    sys.exit(main())
