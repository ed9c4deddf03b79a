"""How much load can infersight's load generator drive, and at what CPU cost?

Against a fast streaming server on 127.0.0.1 (the fake OpenAI server, in its own
process, so its CPU is not counted), this measures:

0. ``--rate`` (default 1,000/s) against a paced upstream (TTFT 20 ms, 5 ms between
   tokens, 16 streamed tokens) pinned to one core, with the load generator (one
   process) pinned to the other: schedule lag p50/p99, the client-limited flag and
   CPU per request, beside a bare aiohttp loop at the same rate on the same server,
   alternating, ``--rounds`` times (see ``loadgen_paced.py``); ``--profile`` adds a
   cProfile of the load generator's hot path; with more than two cores, ``--workers``
   processes on as many cores at that many times the rate;
1. streamed chunks per second and client CPU microseconds per chunk, with 1 and 2
   load-generator workers (closed loop);
2. the highest request rate the scheduler holds with schedule lag p99 under 5 ms;
3. side by side with GuideLLM (installed on demand into ``.bench-venvs/guidellm``,
   never a project dependency) on the same server and load: CPU per chunk, and
   TTFT/ITL agreement on a server with known timing (TTFT 50 ms, 10 ms per token).

infersight's client CPU is the user+system time of its load-generator processes
while the level ran (process start-up excluded), divided by the chunks received.
GuideLLM's is ``getrusage`` of its whole process tree, start-up included; its own
start-up is measured with a tiny run and subtracted.

    python benchmarks/loadgen_capacity.py [--quick] [--no-guidellm]
    python benchmarks/loadgen_capacity.py --paced-only [--rate 1000] [--profile]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from infersight.bench import BenchConfig, run
from infersight_testkit.fake.openai import FakeConfig, FakeOpenAI

sys.path.insert(0, str(Path(__file__).resolve().parent))
import loadgen_paced as paced

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".bench-venvs" / "guidellm"


def cpu_seconds() -> float:
    """User+system CPU of this process and of every child it has reaped."""
    s = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def bench_cfg(url: str, **kw: Any) -> BenchConfig:
    base: dict[str, Any] = {
        "url": url,
        "input_tokens": "16",
        "diagnose": False,
        "progress": False,
        "warmup": "0",
        "cooldown": "0",
    }
    return BenchConfig(**{**base, **kw})


def capacity(url: str, workers: int, requests: int, tokens: int) -> dict[str, Any]:
    """CPU of the load-generator processes while the level ran (start-up excluded)."""
    cfg = bench_cfg(url, concurrency=[32], requests=requests, max_tokens=tokens, workers=workers)
    result = run(cfg)
    level = result.config["levels"][0]
    chunks = sum(len(r.chunk_times) for r in result.records)
    lvl = next(iter(result.aggregates.values()))
    return {
        "workers": workers,
        "chunks": chunks,
        "chunks_per_s": chunks / level["wall_s"],
        "cpu_us_per_chunk": 1e6 * level["loadgen_cpu_s"] / max(chunks, 1),
        "wall_s": level["wall_s"],
        "ok": lvl["requests"]["ok"],
    }


def max_rate(url: str, rates: list[float], seconds: float) -> tuple[float | None, list[Any]]:
    best, rows = None, []
    for rate in rates:
        n = max(20, int(rate * seconds))
        result = run(bench_cfg(url, rate=[rate], requests=n, max_tokens=8))
        a = next(iter(result.aggregates.values()))
        lag = a["schedule_lag"]["p99"]
        ok = lag is not None and lag < 0.005 and a["requests"]["errors"] == 0
        rows.append((rate, lag, a["achieved_rate"], a["requests"]["errors"], ok))
        if ok:
            best = rate
        else:
            break
    return best, rows


# -- GuideLLM ---------------------------------------------------------------------------
def ensure_guidellm() -> tuple[Path | None, str]:
    exe = VENV / "bin" / "guidellm"
    if exe.exists():
        return exe, ""
    try:
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True, capture_output=True)
        subprocess.run(
            [str(VENV / "bin" / "pip"), "install", "-q", "guidellm"],
            check=True,
            capture_output=True,
            timeout=900,
        )
    except (subprocess.SubprocessError, OSError) as e:
        return None, f"GuideLLM could not be installed ({type(e).__name__}); column skipped"
    return (exe, "") if exe.exists() else (None, "GuideLLM installed no CLI; column skipped")


def make_tokenizer(where: Path) -> Path:
    """A tiny local word-level tokenizer: GuideLLM needs one for synthetic data and
    nothing may be downloaded here."""
    code = f"""
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast
words = ["tok"] + [f"w{{i}}" for i in range(2000)]
vocab = {{w: i for i, w in enumerate(["[UNK]"] + words)}}
tk = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
tk.pre_tokenizer = pre_tokenizers.Whitespace()
PreTrainedTokenizerFast(tokenizer_object=tk, unk_token="[UNK]").save_pretrained({str(where)!r})
"""
    subprocess.run([str(VENV / "bin" / "python"), "-c", code], check=True, capture_output=True)
    return where


def run_guidellm(
    exe: Path, url: str, tok: Path, concurrency: int, requests: int, tokens: int, out: Path
) -> tuple[dict[str, Any] | None, float, str]:
    """One GuideLLM run (0.8+ ``run`` syntax); its document, CPU seconds, error."""
    cmd = [
        str(exe),
        "run",
        "--backend",
        f"kind=openai_http,target={url},model=fake",
        "--profile",
        f"kind=concurrent,streams={concurrency}",
        "--constraint",
        f"kind=max_requests,count={requests}",
        "--data",
        f"kind=synthetic_text,prompt_tokens=16,output_tokens={tokens}",
        "--tokenizer",
        f"kind=huggingface_auto,model={tok}",
        "--output",
        f"kind=json,path={out}",
        "--disable-console",
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    c0 = cpu_seconds()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env, cwd=out.parent)
    cpu = cpu_seconds() - c0
    if p.returncode != 0 or not out.exists():
        tail = (p.stderr or p.stdout).strip().splitlines()[-1:] or ["no output"]
        return None, cpu, f"GuideLLM failed: {tail[0][:200]}"
    return json.loads(out.read_text()), cpu, ""


def find_stat(doc: Any, metric: str) -> dict[str, Any] | None:
    """The 'successful' distribution of a GuideLLM metric, wherever the version puts it."""
    if isinstance(doc, dict):
        if metric in doc and isinstance(doc[metric], dict):
            m = doc[metric]
            return m.get("successful") if isinstance(m.get("successful"), dict) else m
        for v in doc.values():
            found = find_stat(v, metric)
            if found:
                return found
    elif isinstance(doc, list):
        for v in doc:
            found = find_stat(v, metric)
            if found:
                return found
    return None


def count_chunks(doc: Any) -> int:
    """Output tokens GuideLLM received (one per chunk from this server)."""
    s = find_stat(doc, "output_token_count")
    if s and "total_sum" in s:
        return int(s["total_sum"])
    return 0


def paced_section(args: argparse.Namespace) -> None:
    """Section 0: one process at ``--rate`` beside a bare aiohttp loop (issue 13)."""
    seconds = args.seconds or (5.0 if args.quick else 10.0)
    rounds = args.rounds or (2 if args.quick else 3)
    cores = sorted(os.sched_getaffinity(0))  # before pinning narrows them to one
    with paced.pinned_upstream(args.realtime) as (url, pid, where):
        print(
            f"\n## --rate {args.rate:g} against a paced upstream (TTFT 20 ms, 5 ms/token, "
            f"16 tokens, streamed), {seconds:g} s per run, {rounds} rounds; {where}"
        )
        runs = []
        for r in range(rounds):
            pair = [
                lambda: paced.run_ours(url, pid, args.rate, seconds),
                lambda: paced.run_bare(url, pid, args.rate, seconds),
            ]
            for fn in pair if r % 2 == 0 else pair[::-1]:
                runs.append(fn())
        paced.print_runs(runs)
        paced.summarise(runs, args.rate)
        if args.workers > 1:
            if len(cores) < args.workers + 1:
                print(
                    f"--workers {args.workers}: needs {args.workers + 1} cores (one for the "
                    f"upstream), this machine has {len(cores)}; skipped"
                )
            else:
                os.sched_setaffinity(0, set(cores[1 : 1 + args.workers]))
                wide = [
                    paced.run_ours(url, pid, args.rate * n, seconds, workers=n)
                    for n in (1, args.workers)
                ]
                print(f"\n## --workers scaling: {args.rate:g}/s per worker, each on its own core")
                paced.print_runs(wide)
        if args.profile:
            rate = args.profile_rate or args.rate / 4
            prof = paced.run_ours(url, pid, rate, seconds, profile=True)
            print(f"\n(profiled run at {rate:g}/s: the profiler itself slows the client)")
            paced.print_runs([prof])
            paced.print_profile(prof["profile"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small counts (< 60 s)")
    ap.add_argument("--no-guidellm", action="store_true", help="skip the GuideLLM column")
    ap.add_argument("--paced-only", action="store_true", help="only section 0 (--rate)")
    ap.add_argument("--rate", type=float, default=1000.0, help="section 0's rate (default 1000/s)")
    ap.add_argument(
        "--seconds", type=float, help="section 0: seconds per run (default 10; quick 5)"
    )
    ap.add_argument("--rounds", type=int, help="section 0: runs per client (default 3; quick 2)")
    ap.add_argument(
        "--workers",
        type=int,
        default=2,
        help="section 0: also N worker processes at N x the rate (needs N+1 cores)",
    )
    ap.add_argument(
        "--profile",
        action="store_true",
        help="section 0: cProfile of the load generator's hot path",
    )
    ap.add_argument("--profile-rate", type=float, help="rate of the profiled run (default rate/4)")
    ap.add_argument(
        "--realtime",
        action="store_true",
        help="section 0 under SCHED_FIFO (root): a quiet core on a shared machine",
    )
    args = ap.parse_args()
    print(
        f"# loadgen capacity ({'quick' if args.quick else 'full'}), {os.cpu_count()} CPUs, "
        f"load avg {os.getloadavg()[0]:.1f}"
    )
    paced_section(args)
    if not args.paced_only:
        sections(args)


def sections(args: argparse.Namespace) -> None:
    """Sections 1-3: closed-loop capacity, the highest rate held, GuideLLM."""
    q = args.quick
    if q and not args.no_guidellm:
        # GuideLLM's own start-up (torch, transformers) takes about a minute here.
        args.no_guidellm = True
        print("note: --quick skips the GuideLLM column; run without --quick for it")
    n_req, tokens = (200, 64) if q else (400, 64)
    rates = [50.0, 100.0, 200.0, 400.0] if q else [50.0, 100.0, 200.0, 400.0, 800.0, 1600.0]
    notes: list[str] = []

    fast = FakeConfig(ttft=0.0, itl=0.0, tokens=tokens, tokenize=False)
    with FakeOpenAI.subprocess(fast) as srv:
        caps = [capacity(srv.base_url, w, n_req, tokens) for w in (1, 2)]
        best, rows = max_rate(srv.base_url, rates, 2.0 if q else 4.0)
        gl_cap = None
        if not args.no_guidellm:
            exe, why = ensure_guidellm()
            if exe is None:
                notes.append(why)
            else:
                with tempfile.TemporaryDirectory() as td:
                    tok = make_tokenizer(Path(td) / "tok")
                    # Start-up cost first (one tiny request), then the real load.
                    _, cpu0, _ = run_guidellm(
                        exe, srv.base_url, tok, 1, 1, 1, Path(td) / "startup.json"
                    )
                    doc, cpu, why = run_guidellm(
                        exe, srv.base_url, tok, 32, n_req, tokens, Path(td) / "cap.json"
                    )
                    if doc is None:
                        notes.append(why)
                    else:
                        chunks = count_chunks(doc) or n_req * tokens
                        gl_cap = {
                            "cpu_us_per_chunk": 1e6 * max(cpu - cpu0, 0.0) / chunks,
                            "cpu_us_per_chunk_gross": 1e6 * cpu / chunks,
                            "startup_cpu_s": cpu0,
                            "chunks": chunks,
                        }
    print("\n## streamed chunks (closed loop, concurrency 32, fake server, 0 ms per token)")
    print(f"{'client':<22}{'chunks/s':>12}{'CPU us/chunk':>15}{'chunks':>10}")
    for c in caps:
        print(
            f"{'infersight ' + str(c['workers']) + ' worker(s)':<22}"
            f"{c['chunks_per_s']:>12.0f}{c['cpu_us_per_chunk']:>15.1f}{c['chunks']:>10}"
        )
    if gl_cap:
        print(f"{'GuideLLM':<22}{'':>12}{gl_cap['cpu_us_per_chunk']:>15.1f}{gl_cap['chunks']:>10}")
        print(
            f"(GuideLLM gross {gl_cap['cpu_us_per_chunk_gross']:.1f} us/chunk including "
            f"{gl_cap['startup_cpu_s']:.1f} s of start-up CPU, which is subtracted above)"
        )
        ratio = caps[0]["cpu_us_per_chunk"] / gl_cap["cpu_us_per_chunk"]
        print(f"infersight / GuideLLM CPU per chunk: {ratio:.2f} (target <= 0.25)")
    print("\n## open-loop rate held with schedule lag p99 < 5 ms (8-token answers)")
    print(f"{'rate/s':>8}{'lag p99 ms':>12}{'achieved/s':>12}{'errors':>8}  held")
    for rate, lag, ach, err, ok in rows:
        lag_s = "-" if lag is None else f"{lag * 1e3:.2f}"
        ach_s = "-" if ach is None else f"{ach:.1f}"
        print(f"{rate:>8.0f}{lag_s:>12}{ach_s:>12}{err:>8}  {'yes' if ok else 'no'}")
    print(f"highest rate held: {best if best is not None else 'none'} req/s")
    agreement(args, n_req, notes)
    for n in notes:
        print(f"note: {n}")


def agreement(args: argparse.Namespace, n_req: int, notes: list[str]) -> None:
    """TTFT and ITL from both tools on a server with known timing."""
    if args.no_guidellm or not (VENV / "bin" / "guidellm").exists():
        return
    requests = 40 if args.quick else 120
    paced = FakeConfig(ttft=0.05, itl=0.01, tokens=20, tokenize=False)
    with FakeOpenAI.subprocess(paced) as srv, tempfile.TemporaryDirectory() as td:
        ours = run(bench_cfg(srv.base_url, concurrency=[4], requests=requests, max_tokens=20))
        a = next(iter(ours.aggregates.values()))
        tok = make_tokenizer(Path(td) / "tok")
        exe = VENV / "bin" / "guidellm"
        doc, _, why = run_guidellm(exe, srv.base_url, tok, 4, requests, 20, Path(td) / "a.json")
    if doc is None:
        notes.append(why)
        return
    g_ttft = find_stat(doc, "time_to_first_token_ms") or {}
    g_itl = find_stat(doc, "inter_token_latency_ms") or {}
    print("\n## agreement on a paced server (TTFT 50 ms, 10 ms/token, 20 tokens, c=4)")
    print(f"{'metric':<34}{'infersight':>12}{'GuideLLM':>10}{'diff':>8}")
    pairs = [
        ("TTFT median (from sent), ms", a["ttft_from_sent"]["p50"], g_ttft.get("median")),
        ("TTFT median (from intended), ms", a["ttft"]["p50"], g_ttft.get("median")),
        ("ITL per-request mean, median, ms", a["itl_per_request"]["p50"], g_itl.get("median")),
        ("ITL pooled p50, ms", a["itl"]["p50"], g_itl.get("median")),
        ("TPOT median, ms", a["tpot"]["p50"], g_itl.get("median")),
    ]
    for name, mine, theirs in pairs:
        m = None if mine is None else mine * 1e3
        diff = "-" if m is None or not theirs else f"{100 * (m - theirs) / theirs:+.1f}%"
        m_s = "-" if m is None else f"{m:.2f}"
        t_s = "-" if theirs is None else f"{theirs:.2f}"
        print(f"{name:<34}{m_s:>12}{t_s:>10}{diff:>8}")


if __name__ == "__main__":
    main()
