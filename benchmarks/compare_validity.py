"""How often ``report A B`` calls a difference on noise, how often it sees a real one,
whether it ever pools unmatched levels, and whether validity flags faults and only
faults (issue 32, docs/design.md section 2, "Comparing runs" and "Validity").

Real bench runs against fake engines in their own processes (127.0.0.1):

- A/A: a pool of runs of one scenario (open loop, TTFT 50 ms), of 1 to 5 durations'
  worth of requests and different seeds; every pair of the pool whose request counts
  lie within 1:5 is compared, and a pair with any metric called better or worse is a
  false alarm (α = 0.05 per call, the noise threshold δ = 5%), with a 95%
  Clopper-Pearson interval;
- families: triples of that pool compared as ``report A B C`` (two runs against one
  baseline); a triple with any call is a family-wise false alarm, with the intervals
  adjusted for the family (Holm) and, for reference, without;
- power: the longest A runs against runs of a server whose TTFT is 10% higher
  (500 requests each): the share of pairs whose TTFT p50 is called worse;
- mismatched loads: concurrency 4 against 8: matched (pooled) levels must be 0;
- validity: the runs of faulty servers flag their fault; clean runs flag nothing.

    .venv/bin/python benchmarks/compare_validity.py [--runs 22] [--seconds 1.0]
"""

from __future__ import annotations

import argparse
import itertools
import os
from typing import Any

from infersight.bench import BenchConfig, run
from infersight.core.records import RunResult
from infersight.report.compare.rows import matched_rows, unmatched_levels
from infersight.report.view import build_views
from infersight.stats.significance import BETTER, WORSE
from infersight_testkit import FakeConfig, FakeOpenAI

TTFT, ITL, TOKENS, RATE = 0.05, 0.002, 8, 100.0


def _bench(url: str, seed: int, seconds: float, **kw: Any) -> RunResult:
    cfg: dict[str, Any] = {
        "url": url,
        "max_tokens": TOKENS,
        "input_tokens": "fixed:8",
        "progress": False,
        "no_scrape": True,
        "rate": [RATE],
        "duration": seconds,
        "seed": seed,
        **kw,
    }
    return run(BenchConfig(**cfg))


def _calls(a: RunResult, b: RunResult) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for _, _, rows in matched_rows(build_views([a, b])):
        out.update({r.metric: c for r in rows if (c := r.call(1)) is not None})
    return out


def _alarm(calls: dict[str, Any]) -> bool:
    return any(c.call in (BETTER, WORSE) for c in calls.values())


def _family_alarm(a: RunResult, b: RunResult, c: RunResult) -> bool:
    rows = [r for _, _, rs in matched_rows(build_views([a, b, c])) for r in rs]
    return any(
        x is not None and x.call in (BETTER, WORSE) for r in rows for x in (r.call(1), r.call(2))
    )


def _n(r: RunResult) -> int:
    return len(r.records)


def _flags(r: RunResult) -> list[str]:
    return [c["check"] for a in r.aggregates.values() for c in a["validity"] if not c["ok"]]


def _cp(k: int, n: int) -> tuple[float, float]:
    from scipy.stats import beta

    lo = float(beta.ppf(0.025, k, n - k + 1)) if k else 0.0
    hi = float(beta.ppf(0.975, k + 1, n - k)) if k < n else 1.0
    return lo, hi


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=22, help="A runs in the A/A pool")
    ap.add_argument("--seconds", type=float, default=1.0, help="the shortest run's length")
    ap.add_argument("--power-runs", type=int, default=5)
    ap.add_argument("--triples", type=int, default=120, help="A/A/A families compared")
    args = ap.parse_args()
    print(f"load: {os.getloadavg()}")
    clean = FakeConfig(ttft=TTFT, itl=ITL, tokens=TOKENS)
    with (
        FakeOpenAI.subprocess(clean) as a,
        FakeOpenAI.subprocess(FakeConfig(ttft=TTFT * 1.1, itl=ITL, tokens=TOKENS)) as b,
    ):
        pool = [
            _bench(a.base_url, seed, args.seconds * (1 + seed % 5)) for seed in range(args.runs)
        ]
        pairs = [
            (x, y)
            for x, y in itertools.combinations(pool, 2)
            if max(_n(x), _n(y)) <= 5 * min(_n(x), _n(y))
        ]
        called = {(id(x), id(y)): _alarm(_calls(x, y)) for x, y in pairs}
        alarms = [p for p in pairs if called[id(p[0]), id(p[1])]]
        lo, hi = _cp(len(alarms), len(pairs))
        sizes = sorted({round(max(_n(x), _n(y)) / min(_n(x), _n(y)), 1) for x, y in pairs})
        print(
            f"A/A: {len(alarms)}/{len(pairs)} pairs call a difference = "
            f"{len(alarms) / len(pairs):.1%} [95% CP {lo:.1%}, {hi:.1%}]; "
            f"size ratios {sizes[0]}..{sizes[-1]}"
        )
        triples = [
            t
            for t in itertools.combinations(pool, 3)
            if (id(t[0]), id(t[1])) in called and (id(t[0]), id(t[2])) in called
        ]
        triples = triples[:: max(1, len(triples) // args.triples)][: args.triples]
        fam = sum(_family_alarm(*t) for t in triples)
        raw = sum(called[id(a0), id(b0)] or called[id(a0), id(c0)] for a0, b0, c0 in triples)
        for name, k in (("Holm-adjusted", fam), ("unadjusted (95%)", raw)):
            lo, hi = _cp(k, len(triples))
            print(
                f"A/A/A families, {name}: {k}/{len(triples)} call a difference = "
                f"{k / len(triples):.1%} [95% CP {lo:.1%}, {hi:.1%}]"
            )
        long_a = [_bench(a.base_url, 100 + i, 5.0) for i in range(args.power_runs)]
        long_b = [_bench(b.base_url, 200 + i, 5.0) for i in range(args.power_runs)]
        got = [_calls(x, y)["TTFT p50"].call for x in long_a for y in long_b]
        hits = [c for c in got if c == WORSE]
        n_pow = len(long_a) * len(long_b)
        lo, hi = _cp(len(hits), n_pow)
        print(
            f"power (TTFT +10%, ~{_n(long_a[0])}/{_n(long_b[0])} requests): {len(hits)}/"
            f"{n_pow} = {len(hits) / n_pow:.0%} [95% CP {lo:.0%}, {hi:.0%}]; calls {set(got)}"
        )
        c4 = _bench(a.base_url, 7, 2.0, rate=[], concurrency=[4])
        c8 = _bench(a.base_url, 8, 2.0, rate=[], concurrency=[8])
        views = build_views([c4, c8])
        print(
            f"mismatched loads: {len(matched_rows(views))} pooled comparisons; "
            f"listed: {unmatched_levels(views)}"
        )
        flagged = [f for r in pool + long_a if (f := _flags(r))]
        print(
            f"validity, clean runs with flags: {len(flagged)}/{len(pool) + len(long_a)} {flagged}"
        )
    faults = {
        "tokens_per_chunk": FakeConfig(ttft=TTFT, itl=ITL, tokens=TOKENS, tokens_per_chunk=2),
        "tokens": FakeConfig(ttft=TTFT, itl=ITL, tokens=TOKENS, usage_offset=2),
        "stationarity": FakeConfig(ttft=TTFT, itl=ITL, tokens=TOKENS, drift=0.5),
        "rate": FakeConfig(tokens=1),
    }
    for want, cfg in faults.items():
        with FakeOpenAI.subprocess(cfg) as s:
            kw: dict[str, Any] = {"rate": [20000.0]} if want == "rate" else {}
            got = _flags(_bench(s.base_url, 0, 2.0, **kw))
        print(f"validity, fault {want}: flagged {got} -> {'yes' if want in got else 'NO'}")
    print(f"load: {os.getloadavg()}")


if __name__ == "__main__":
    main()
