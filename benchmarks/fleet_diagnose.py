"""Fleet diagnosis from Prometheus at scale (issue 15), in one run:

1. a synthetic fleet of N vLLM V1 replicas, each with a dcgm-exporter GPU, over H hours
   at 15 s (slot-bound, KV-full, idle and busy replicas whose load follows the time of
   day) is written as OpenMetrics and loaded into a Prometheus TSDB with
   ``promtool tsdb create-blocks-from openmetrics``;
2. a Prometheus (Debian's) is started on that data directory;
3. ``infersight diagnose --prometheus`` reads a quarter of the range and the whole range,
   each in its own process: wall time and peak RSS side by side. Flat memory means the
   peak RSS does not grow with the range (ratio near 1).

    .venv/bin/python benchmarks/fleet_diagnose.py            # 50 replicas, 6 h vs 24 h
    .venv/bin/python benchmarks/fleet_diagnose.py --quick    # 10 replicas, 3 h vs 12 h
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np
import psutil
from rich.console import Console
from rich.table import Table

from infersight.core.listen import free_port

STEP = 15
MODEL = "meta-llama/Llama-3.1-8B-Instruct"
SLOTS = 32
TTFT_LE = ("0.1", "0.5", "2.5", "+Inf")


def _load(kind: int, day: np.ndarray, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """One replica's signals. ``day`` (0..1) is the diurnal load; ``kind`` its role."""
    n = day.size
    peak = day > 0.6
    noise = rng.integers(0, 2, n)
    if kind == 0:  # slot-bound at peak, busy otherwise
        running = np.where(peak, SLOTS, 12 + 8 * day + noise)
        waiting = np.where(peak, 5 + 20 * (day - 0.6) * 2.5 + noise, 0)
        kv, util, sm = 0.5 + 0.1 * day, 0.9 + 0.05 * day, 0.7 * np.ones(n)
    elif kind == 1:  # KV-full at peak
        running = 14 + 4 * day + noise
        waiting = np.where(peak, 6 + 2 * noise, 0)
        kv, util, sm = np.where(peak, 0.96, 0.6), 0.95 * np.ones(n), 0.8 * np.ones(n)
    elif kind < 8:  # idle: the router sends them little
        running = 1 + noise + 2 * day
        waiting = np.zeros(n)
        kv, util, sm = 0.05 * np.ones(n), 0.1 + 0.1 * day, 0.05 + 0.05 * day
    else:  # healthy and busy
        running = 10 + 10 * day + noise
        waiting = np.zeros(n)
        kv, util, sm = 0.3 + 0.2 * day, 0.6 + 0.3 * day, 0.5 + 0.2 * day
    rate = running / 4.0  # requests finished per second
    return {
        "running": running,
        "waiting": waiting,
        "kv": kv + 0 * day,
        "util": util * 100 + 0 * day,
        "sm": sm + 0 * day,
        "preempt": np.cumsum(np.where(kv >= 0.95, 0.5, 0.0) * STEP),
        "done": np.cumsum(rate * STEP),
        "tokens": np.cumsum(rate * 200 * STEP),
    }


def _lines(prefix: str, values: np.ndarray, ts: list[str]) -> str:
    return "".join(f"{prefix} {v:.6g} {t}\n" for v, t in zip(values.tolist(), ts, strict=True))


def write_openmetrics(path: Path, replicas: int, start: int, end: int) -> int:
    """The fleet as OpenMetrics text (families contiguous, points in time order)."""
    times = np.arange(start, end, STEP)
    ts = [str(int(t)) for t in times]
    # the daily peak 3 h before the end, so the last quarter of the range has one too
    day = 0.5 + 0.5 * np.sin(2 * np.pi * (times - end) / 86400 + 0.75 * np.pi)
    rng = np.random.default_rng(15)
    data = [_load(i % 10, day, rng) for i in range(replicas)]
    vl = [
        f'engine="0",instance="10.0.{i // 250}.{i % 250}:8000",job="vllm",model_name="{MODEL}",'
        f'namespace="llm",pod="vllm-{i}"'
        for i in range(replicas)
    ]
    gl = [
        f'Hostname="node-{i}",UUID="GPU-{i:08d}-0000-4000-8000-000000000000",container="vllm",'
        f'gpu="0",instance="node-{i}:9400",job="dcgm-exporter",modelName="NVIDIA H100 80GB HBM3",'
        f'namespace="llm",pod="vllm-{i}"'
        for i in range(replicas)
    ]
    n = 0
    with path.open("w") as f:
        for fam, typ, key, labels in (
            ("vllm:num_requests_running", "gauge", "running", vl),
            ("vllm:num_requests_waiting", "gauge", "waiting", vl),
            ("vllm:kv_cache_usage_perc", "gauge", "kv", vl),
            ("vllm:num_preemptions", "counter", "preempt", vl),
            ("vllm:request_success", "counter", "done", vl),
            ("vllm:generation_tokens", "counter", "tokens", vl),
            ("DCGM_FI_DEV_GPU_UTIL", "gauge", "util", gl),
            ("DCGM_FI_PROF_SM_ACTIVE", "gauge", "sm", gl),
        ):
            f.write(f"# TYPE {fam} {typ}\n")
            sample = fam + ("_total" if typ == "counter" else "")
            for d, lab in zip(data, labels, strict=True):
                f.write(_lines(f"{sample}{{{lab}}}", d[key], ts))
                n += len(ts)
        n += _histogram(f, data, vl, ts)
        f.write("# EOF\n")
    return n


def _histogram(
    f: object, data: list[dict[str, np.ndarray]], labels: list[str], ts: list[str]
) -> int:
    """TTFT histograms: the share above each bound grows with the queue."""
    fam = "vllm:time_to_first_token_seconds"
    f.write(f"# TYPE {fam} histogram\n")  # type: ignore[attr-defined]
    n = 0
    for d, lab in zip(data, labels, strict=True):
        done = d["done"]
        slow = np.clip(d["waiting"] / 40.0, 0.0, 0.9)
        counts = [done * (1 - slow) * 0.6, done * (1 - slow * 0.5), done * (1 - slow * 0.1), done]
        total = done * (0.2 + 2.0 * slow)
        rows = []
        for k, t in enumerate(ts):
            for le, c in zip(TTFT_LE, counts, strict=True):
                rows.append(f'{fam}_bucket{{{lab},le="{le}"}} {c[k]:.6g} {t}\n')
            rows.append(
                f"{fam}_count{{{lab}}} {done[k]:.6g} {t}\n{fam}_sum{{{lab}}} {total[k]:.6g} {t}\n"
            )
        f.write("".join(rows))  # type: ignore[attr-defined]
        n += len(ts) * 6
    return n


def _wait_ready(url: str, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise SystemExit("Prometheus did not become ready")


def _settle(url: str, timeout: float = 600) -> int:
    """Wait until Prometheus has compacted promtool's 2-hour blocks (as a server that
    has run a while has): its count of loaded blocks holds for 15 s."""
    seen: list[int] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with urllib.request.urlopen(f"{url}/metrics", timeout=10) as r:
            text = r.read().decode()
        line = next(
            ln for ln in text.splitlines() if ln.startswith("prometheus_tsdb_blocks_loaded ")
        )
        seen.append(int(float(line.split()[1])))
        if len(seen) >= 4 and len(set(seen[-4:])) == 1:
            return seen[-1]
        time.sleep(5)
    return seen[-1] if seen else 0


def diagnose_run(url: str, start: int, end: int) -> dict[str, float]:
    """One ``infersight diagnose --prometheus`` process: wall time, peak RSS, its stats."""
    cmd = [
        sys.executable,
        "-c",
        "from infersight.cli import main; main()",
        "diagnose",
        "--prometheus",
        url,
        "--start",
        str(start),
        "--end",
        str(end),
        "--step",
        f"{STEP}s",
        "--json",
    ]
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.PIPE)
        ps, peak = psutil.Process(proc.pid), 0
        while proc.poll() is None:
            try:
                peak = max(peak, ps.memory_info().rss)
            except psutil.Error:
                break
            time.sleep(0.02)
        wall = time.perf_counter() - t0
        err = proc.stderr.read().decode() if proc.stderr else ""
        if proc.returncode != 0:
            raise SystemExit(f"diagnose failed: {err}")
        out.seek(0)
        doc = json.loads(out.read())
    mains: dict[str, int] = {}
    for rd in doc["replicas"]:
        mains[rd["main"]] = mains.get(rd["main"], 0) + 1
    return {
        "hours": (end - start) / 3600,
        "wall": wall,
        "rss": peak / 2**20,
        **doc["stats"],
        "replicas": len(doc["replicas"]),
        "mains": mains,
        "headline": doc["headline"],
    }  # type: ignore[dict-item]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="10 replicas, 3 h vs 12 h")
    ap.add_argument("--replicas", type=int, default=None)
    ap.add_argument("--hours", type=float, default=None, help="the whole range (default 24)")
    ap.add_argument(
        "--keep",
        type=Path,
        default=None,
        help="keep the TSDB in this directory (and reuse it when it holds the same fleet)",
    )
    args = ap.parse_args()
    replicas = args.replicas or (10 if args.quick else 50)
    hours = args.hours or (12.0 if args.quick else 24.0)
    for tool in ("prometheus", "promtool"):
        if not shutil.which(tool):
            raise SystemExit(f"{tool} is not installed (apt-get install prometheus)")
    con = Console()
    work = args.keep or Path(tempfile.mkdtemp(prefix="infersight-fleet-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    om, tsdb, meta = work / "fleet.om", work / "tsdb", work / "range.json"
    want = {"replicas": replicas, "hours": hours}
    if args.keep and meta.exists() and {k: json.loads(meta.read_text())[k] for k in want} == want:
        end = int(json.loads(meta.read_text())["end"])  # the TSDB kept by an earlier run
        con.print(f"reusing the TSDB in {work} ({replicas} replicas x {hours:g} h)")
    else:
        end = (int(time.time()) - 3600) // 3600 * 3600
        t0 = time.perf_counter()
        samples = write_openmetrics(om, replicas, end - int(hours * 3600), end)
        t_gen = time.perf_counter() - t0
        shutil.rmtree(tsdb, ignore_errors=True)
        t0 = time.perf_counter()
        subprocess.run(
            ["promtool", "tsdb", "create-blocks-from", "openmetrics", str(om), str(tsdb)],
            check=True,
            capture_output=True,
            timeout=3600,
        )
        t_load = time.perf_counter() - t0
        om.unlink()
        meta.write_text(json.dumps({**want, "end": end}))
        con.print(
            f"{replicas} replicas x {hours:g} h at {STEP} s: {samples:,} samples written in "
            f"{t_gen:.1f} s, loaded by promtool in {t_load:.1f} s"
        )
    start = end - int(hours * 3600)
    port = free_port()
    cfg = work / "prometheus.yml"
    cfg.write_text(f"global:\n  scrape_interval: {STEP}s\n")
    proc = subprocess.Popen(
        [
            "prometheus",
            f"--config.file={cfg}",
            f"--storage.tsdb.path={tsdb}",
            "--storage.tsdb.retention.time=3650d",
            "--log.level=warn",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(url)
        blocks = _settle(url)
        con.print(f"Prometheus {url}: {blocks} blocks after compaction")
        quarter = diagnose_run(url, end - int(hours * 900), end)
        whole = diagnose_run(url, start, end)
    finally:
        proc.terminate()
        proc.wait(30)
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    tab = Table(title=f"diagnose --prometheus: {replicas} replicas, step {STEP} s")
    for col in (
        "range",
        "points read",
        "queries",
        "pages",
        "wall s",
        "peak RSS MiB",
        "main verdicts",
    ):
        tab.add_column(col)
    for r in (quarter, whole):
        mains = ", ".join(f"{k} {v}" for k, v in sorted(r["mains"].items()))  # type: ignore[attr-defined]
        tab.add_row(
            f"{r['hours']:g} h",
            f"{r['points']:,}",
            str(r["queries"]),
            str(r["pages"]),
            f"{r['wall']:.1f}",
            f"{r['rss']:.0f}",
            mains,
        )
    con.print(tab)
    con.print(
        f"peak RSS {whole['hours']:g} h / {quarter['hours']:g} h: "
        f"{whole['rss'] / quarter['rss']:.2f}"
        f" (points read: {whole['points'] / max(1, quarter['points']):.1f}x); "
        f"{whole['hours']:g} h diagnosed in {whole['wall']:.1f} s "
        f"({'under' if whole['wall'] < 60 else 'OVER'} 60 s)"
    )
    con.print("headline: " + " / ".join(whole["headline"]))  # type: ignore[arg-type]


if __name__ == "__main__":
    main()
