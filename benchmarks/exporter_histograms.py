"""Exporter: what keeping the engines' latency histograms costs per Prometheus scrape.

One exporter collector over the latest round of five engines (the fake engine's vLLM V1,
SGLang, TGI and llama.cpp dialects after some traffic, and the vLLM fixture once more
as a second replica), rendered side by side in one run:

  - ``histograms``: what ``infersight exporter`` serves (the engines' own buckets);
  - ``sum/count only``: the same rounds without the bucket samples (what a scrape would
    cost if latencies were reduced to sums and counts).

Prints render time per scrape (median of N, the two alternated so both see the same load
on a shared machine) and payload size, and the ratios.

    .venv/bin/python benchmarks/exporter_histograms.py [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import time

from infersight.core.records import Sample
from infersight.telemetry import render
from infersight.telemetry.engine_metrics import Normalizer
from infersight_testkit.fake.config import FakeConfig
from infersight_testkit.fake.dialects import DIALECTS
from infersight_testkit.fake.metrics import EngineMetrics
from infersight_testkit.fake.slots import SlotPool


def engine_round() -> list[Sample]:
    """Normalised samples (with buckets) of every dialect after 200 requests each."""
    out: list[Sample] = []
    for i, d in enumerate((*DIALECTS, "vllm")):
        m = EngineMetrics(FakeConfig(metrics_dialect=d, slots=8, itl=0.02), SlotPool(8))
        for k in range(200):
            m.arrived()
            q = 0.01 * (k % 50)
            m.observe(
                queue=q,
                ttft=q + 0.1,
                itl=0.02,
                e2e=q + 2.0,
                prompt=300 + k,
                tokens=100,
                finish="stop",
            )
        n = Normalizer(d, source=f"http://replica{i}:8000/metrics", buckets=True)
        n.normalize_text(m.render().decode(), 1.0)
        out += n.normalize_text(m.render().decode(), 2.0)
    return out


def timed(a: list[Sample], b: list[Sample], n: int) -> tuple[float, float, int, int]:
    """Median render times of ``a`` and ``b``, alternated so both see the same load."""
    ta: list[float] = []
    tb: list[float] = []
    for _ in range(n):
        for samples, times in ((a, ta), (b, tb)):
            t = time.perf_counter()
            render(samples)
            times.append(time.perf_counter() - t)
    return statistics.median(ta), statistics.median(tb), len(render(a)), len(render(b))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer renders (a few seconds)")
    args = ap.parse_args()
    n = 30 if args.quick else 300
    full = engine_round()
    lean = [s for s in full if s.labels.get("stat") != "bucket"]
    t_full, t_lean, b_full, b_lean = timed(full, lean, n)
    print(f"{len(full)} samples with buckets, {len(lean)} without; median of {n} renders")
    print(f"  histograms      {t_full * 1e3:7.2f} ms  {b_full / 1024:7.1f} KiB")
    print(f"  sum/count only  {t_lean * 1e3:7.2f} ms  {b_lean / 1024:7.1f} KiB")
    print(f"  ratio           {t_full / t_lean:7.2f} x  {b_full / b_lean:7.2f} x")


if __name__ == "__main__":
    main()
