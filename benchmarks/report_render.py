"""Time to render `infersight report` for synthetic RunResults of 10,000 and 100,000 requests.

Each row is one RunResult size. Columns, in seconds unless noted:

- gen: build the synthetic run (not part of the report; for scale);
- aggregate: ``stats.aggregate.aggregate`` over every level (bench does this once and stores it);
- load: ``load_run_result`` of the saved JSON (what ``infersight report FILE`` does first);
- views: group records, per-level arrays, verdicts (stored aggregates: nothing recomputed);
- html / md: render the HTML page / the Markdown summary;
- report: load + views + html + md, i.e. the command's wall time on a bench output file;
- render_cpu: CPU seconds of views + html + md (less sensitive to a busy machine);
- report_recompute: the command's wall time when the file has no stored aggregates
  (skipped above 10,000 requests with --quick).

Usage: python benchmarks/report_render.py [--quick] [--sizes 10000,100000] [--repeat N]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from infersight.core.records import RunResult, load_run_result, save_run_result
from infersight.report.html import render_views_html
from infersight.report.markdown import render_views_markdown
from infersight.report.view import build_views
from infersight.stats.aggregate import aggregate
from infersight_testkit.synthetic_runs import make_run

LEVELS = (1, 2, 4, 8, 16, 32)


def timed(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """Median wall time of ``repeat`` calls, and the last result."""
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def bench_size(n: int, repeat: int, tmp: Path, recompute_too: bool = True) -> dict[str, Any]:
    t = time.perf_counter()
    run = make_run(n, levels=LEVELS, seed=n)
    row: dict[str, Any] = {"requests": n, "gen": time.perf_counter() - t}
    row["chunks"] = sum(len(r.chunk_times) for r in run.records)
    bare = tmp / f"bare-{n}.json"
    save_run_result(run, bare)

    def agg_all() -> dict[str, Any]:
        by: dict[str, list[Any]] = {}
        for r in run.records:
            by.setdefault(r.labels["level"], []).append(r)
        return {k: aggregate(v, target_concurrency=int(k[2:])) for k, v in by.items()}

    row["aggregate"], run.aggregates = timed(agg_all, 1)
    path = tmp / f"run-{n}.json"
    save_run_result(run, path)
    row["file_mib"] = path.stat().st_size / 2**20
    row["load"], loaded = timed(lambda: load_run_result(path), 1)
    row["views"], views = timed(lambda: build_views([loaded]), repeat)
    row["html"], html = timed(lambda: render_views_html(views), repeat)
    row["md"], _ = timed(lambda: render_views_markdown(views), repeat)
    row["html_kib"] = len(html.encode()) / 1024
    row["report"] = row["load"] + row["views"] + row["html"] + row["md"]
    cpu = time.process_time()
    v2 = build_views([loaded])
    render_views_html(v2)
    render_views_markdown(v2)
    row["render_cpu"] = time.process_time() - cpu  # views + html + md, CPU seconds
    if not recompute_too:
        row["report_recompute"] = float("nan")
        return row

    def recompute() -> str:
        r: RunResult = load_run_result(bare)
        v = build_views([r])
        return render_views_html(v) + render_views_markdown(v)

    row["report_recompute"], _ = timed(recompute, 1)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true", help="one repetition (< 60 s)")
    ap.add_argument("--sizes", default="10000,100000", help="comma-separated request counts")
    ap.add_argument("--repeat", type=int, default=None, help="repetitions of the render steps")
    args = ap.parse_args()
    repeat = args.repeat or (1 if args.quick else 3)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    cols = [
        ("requests", "{:,}"),
        ("chunks", "{:,}"),
        ("file_mib", "{:.0f}"),
        ("gen", "{:.2f}"),
        ("aggregate", "{:.2f}"),
        ("load", "{:.2f}"),
        ("views", "{:.2f}"),
        ("html", "{:.2f}"),
        ("md", "{:.3f}"),
        ("html_kib", "{:.0f}"),
        ("report", "{:.2f}"),
        ("render_cpu", "{:.2f}"),
        ("report_recompute", "{:.2f}"),
    ]
    print(f"report render time ({len(LEVELS)} levels, median of {repeat}; seconds)", flush=True)
    print(" ".join(f"{c:>16}" for c, _ in cols), flush=True)
    with tempfile.TemporaryDirectory(prefix="infersight-report-bench-") as d:
        for n in sizes:
            # --quick skips the slow no-stored-aggregates variant above 10k requests.
            row = bench_size(n, repeat, Path(d), recompute_too=not args.quick or n <= 10_000)
            print(" ".join(f"{f.format(row[c]):>16}" for c, f in cols), flush=True)


if __name__ == "__main__":
    main()
