"""The call ``report A B`` makes for a difference that is noise and for one that is real
(issue 22, docs/design.md section 2, "Comparing runs").

A fake engine in its own process, bench against it twice per scenario:

- A/A: two runs of one scenario (open loop, 20 req/s, TTFT 100 ms): every call should be
  "no significant difference" (or "inconclusive" for a p99 with too few requests),
  never better or worse;
- A/B TTFT: the same, against a server whose first token is 20% slower: TTFT and e2e
  "worse", throughput "no significant difference" (the same offered rate);
- A/B closed loop: 4 clients against a server 20% slower in every step: throughput and
  latency "worse";
- the A/A and TTFT pairs again with ``--repeat 3`` (runs as the units).

    .venv/bin/python benchmarks/compare_calls.py [--quick]

Default: 15 s per run (issue 22's case). ``--quick``: 8 s per run, repeats of 4 s.
"""

from __future__ import annotations

import argparse
from contextlib import ExitStack
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from infersight.bench import BenchConfig, run
from infersight.core.records import RunResult
from infersight.report.compare.rows import matched_rows
from infersight.report.view import build_views
from infersight.stats.significance import BETTER, WORSE
from infersight_testkit import FakeConfig, FakeOpenAI

TTFT, ITL, TOKENS = 0.1, 0.005, 8
METRICS = ("requests/s", "TTFT p50", "TTFT p99", "e2e p50", "e2e p99")


def _run(url: str, **kw: Any) -> RunResult:
    cfg = {
        "url": url,
        "max_tokens": TOKENS,
        "input_tokens": "fixed:8",
        "progress": False,
        "no_scrape": True,
        **kw,
    }
    return run(BenchConfig(**cfg))


def _calls(a: RunResult, b: RunResult) -> dict[str, Any]:
    ((_, _, rows),) = matched_rows(build_views([a, b]))
    return {r.metric: r.call(1) for r in rows if r.call(1) is not None}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="8 s runs, repeats of 4 s")
    args = ap.parse_args()
    seconds, rep_seconds = (8.0, 4.0) if args.quick else (15.0, 6.0)
    con = Console()
    if not con.is_terminal:
        con = Console(width=160)
    table = Table("scenario", "metric", "B/A [95% interval]", "units", "call", "false call")
    fakes = {
        "base": FakeConfig(ttft=TTFT, itl=ITL, tokens=TOKENS),
        "ttft+20%": FakeConfig(ttft=TTFT * 1.2, itl=ITL, tokens=TOKENS),
        "step+20%": FakeConfig(ttft=TTFT * 1.2, itl=ITL * 1.2, tokens=TOKENS),
    }
    false_calls = 0
    with ExitStack() as stack:
        srv = {k: stack.enter_context(FakeOpenAI.subprocess(c)).base_url for k, c in fakes.items()}
        open_loop = {"rate": [20.0], "duration": seconds}
        closed = {"concurrency": [4], "duration": seconds}
        repeat = {"rate": [20.0], "duration": rep_seconds, "repeat": 3}
        scenarios = [
            ("A/A, 20 req/s", srv["base"], srv["base"], open_loop, {}),
            (
                "A/B, TTFT +20%",
                srv["base"],
                srv["ttft+20%"],
                open_loop,
                {"TTFT p50": WORSE, "e2e p50": WORSE},
            ),
            (
                "A/B, closed loop, steps +20%",
                srv["base"],
                srv["step+20%"],
                closed,
                {"requests/s": WORSE, "TTFT p50": WORSE, "e2e p50": WORSE},
            ),
            ("A/A, --repeat 3", srv["base"], srv["base"], repeat, {}),
            (
                "A/B, TTFT +20%, --repeat 3",
                srv["base"],
                srv["ttft+20%"],
                repeat,
                {"TTFT p50": WORSE, "e2e p50": WORSE},
            ),
        ]
        for name, a_url, b_url, kw, expected in scenarios:
            calls = _calls(_run(a_url, **kw), _run(b_url, **kw))
            for metric in METRICS:
                c = calls.get(metric)
                if c is None:
                    continue
                wrong = (c.call in (BETTER, WORSE)) != (metric in expected) or (
                    metric in expected and c.call != expected[metric]
                )
                false_calls += wrong
                table.add_row(
                    name,
                    metric,
                    escape(c.interval_text()),
                    f"{c.units[0]}/{c.units[1]} {c.basis}",
                    c.call,
                    "yes" if wrong else "",
                )
    con.print(table)
    con.print(f"calls that disagree with the known difference: {false_calls}")


if __name__ == "__main__":
    main()
