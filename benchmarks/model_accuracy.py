"""How right the fitted model is, against servers whose truth is known.

Reads the runs ``benchmarks/model_truth.py --save DIR`` wrote (fake servers with known
slots, KV, compute knee and error rate, and the embedded engine at --parallel 1, 2, 4,
8) and prints, side by side with that truth:

- per scenario: the limiter the model names and the true one, the slot count it
  inferred (within ±1, or ±10% above 16), the fix's knob (never one that does not
  bind), and the self-check's held-out error (leave one level out);
- predictions of settings the run did not have, each against its own measurement:
  a fake at 4 slots predicting 2 and 8 slots; 5 and 10 req/s predicting 15 req/s; the
  embedded engine at --parallel 4 predicting 2 and 8 (MAPE of throughput, TTFT p50 and
  TPOT p50; goals 10%, 15%, 15%), with the engine's A/A noise floor beside it when
  ``--aa DIR2`` holds a second run of the same scenarios.

    .venv/bin/python benchmarks/model_truth.py --save /tmp/truth
    .venv/bin/python benchmarks/model_truth.py --save /tmp/truth_aa --only engine_parallel_4
    .venv/bin/python benchmarks/model_accuracy.py /tmp/truth --aa /tmp/truth_aa
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

import orjson

from infersight.core.records import load_run_result
from infersight.core.server_model import CHECKED_METRICS
from infersight.servermodel import fit_model, predict_level, run_data, self_check
from infersight.servermodel.advise import advise
from infersight.servermodel.bounds import MARGIN

GOALS = {"throughput": 0.10, "ttft_p50": 0.15, "tpot_p50": 0.15}
#: (run the model is fitted on, its levels or None for all, run predicted, its slots).
CROSS = [
    ("slots_4", None, "slots_2", 2.0),
    ("slots_4", None, "slots_8", 8.0),
    ("closed_slots", None, "slots_8_flat", 8.0),
    ("open_compute", ["r=5", "r=10"], "open_compute_15", None),
    ("engine_parallel_4", None, "engine_parallel_2", 2.0),
    ("engine_parallel_4", None, "engine_parallel_8", 8.0),
]


def _ape(meas: float | None, pred: float | None) -> float | None:
    if not meas or pred is None or not math.isfinite(pred):
        return None
    return abs(pred - meas) / abs(meas)


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.0%}"


def scenarios(folder: Path, truth: dict[str, Any]) -> tuple[int, int]:
    right = total = 0
    print(
        "scenario             limiter (truth)        slots (truth)   fix knob    "
        "held-out MAPE thr/TTFT/TPOT"
    )
    for name, t in sorted(truth.items()):
        path = folder / f"{name}.json"
        if not path.exists() or name == "open_compute_15":
            continue
        d = run_data(load_run_result(path))
        if d.levels and all(lv.at_ceiling for lv in d.levels):
            lim, s_txt, knob, mape = "client", "-", "-", "-"
        else:
            m = fit_model(d)
            sc = self_check(d, m)
            lim, _, fix = advise(d, m, sc)
            s_txt = m.slots.text()
            knob = (fix.knob or "none") if fix else "none"
            mape = "/".join(_pct(sc.mape.get(k)) for k in CHECKED_METRICS)
            if m.slots.value is not None and t.get("slots"):
                true_s = float(t["slots"])
                ok = abs(m.slots.value - true_s) <= max(1.0, 0.1 * true_s if true_s > 16 else 1.0)
                s_txt += " ok" if ok else " WRONG"
        hit = lim == t["limiter"]
        right += hit
        total += 1
        print(
            f"{name:<20} {lim:<8} ({t['limiter']:<8}) {'ok ' if hit else 'NO '}  "
            f"{s_txt:<14} ({t.get('slots')})  {knob:<10}  {mape}"
        )
    return right, total


def cross(folder: Path, aa: Path | None) -> None:
    print(
        "\nheld-out settings: predicted vs measured per level (APE thr/TTFT p50/TPOT p50);"
        "\n'past range': levels the model runs with more sequences than the fitted run had"
        " (marked estimates), and how many of them measured within the stated range"
        " (from the low end, compute saturating at the measured top, to the prediction)"
    )
    for base, levels, target, slots in CROSS:
        a, b = folder / f"{base}.json", folder / f"{target}.json"
        if not a.exists() or not b.exists():
            continue
        m = fit_model(run_data(load_run_result(a)), levels)
        top = m.measured.get("n", 0.0)
        db = run_data(load_run_result(b))
        errs: dict[str, list[float]] = {k: [] for k in CHECKED_METRICS}
        past = inside = 0
        for lv in db.levels:
            pred = predict_level(m, db, lv, slots=slots)
            row = {k: _ape(lv.figures.get(k), pred.get(k)) for k in CHECKED_METRICS}
            for k, v in row.items():
                if v is not None:
                    errs[k].append(v)
            if top and (pred.get("running") or 0.0) > top + MARGIN:
                past += 1
                low = predict_level(m, db, lv, slots=slots, saturate=top)
                got, hi, lo = (lv.figures.get("throughput"), pred["throughput"], low["throughput"])
                inside += bool(got and hi and lo and 0.95 * lo <= got <= 1.05 * hi)
        mape = {k: (sum(v) / len(v) if v else None) for k, v in errs.items()}
        met = all(mape[k] is not None and mape[k] <= GOALS[k] for k in GOALS)  # type: ignore[operator]
        floor = ""
        if aa is not None and (aa / f"{base}.json").exists():
            floor = "  A/A floor " + _aa(folder / f"{base}.json", aa / f"{base}.json")
        ranged = f"  past range {past}/{len(db.levels)}, within it {inside}/{past}" if past else ""
        print(
            f"  {base}{'[' + ','.join(levels) + ']' if levels else ''} -> {target}: MAPE "
            + " / ".join(_pct(mape[k]) for k in CHECKED_METRICS)
            + f"  goals {'met' if met else 'NOT met'}{ranged}{floor}"
        )


def _aa(a: Path, b: Path) -> str:
    """The same scenario measured twice: the APE between the runs, per metric."""
    da, db = run_data(load_run_result(a)), run_data(load_run_result(b))
    other = {lv.name: lv for lv in db.levels}
    errs: dict[str, list[float]] = {k: [] for k in CHECKED_METRICS}
    for lv in da.levels:
        if lv.name in other:
            for k in CHECKED_METRICS:
                v = _ape(lv.figures.get(k), other[lv.name].figures.get(k))
                if v is not None:
                    errs[k].append(v)
    return " / ".join(_pct(sum(v) / len(v) if v else None) for v in errs.values())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", type=Path, help="the folder model_truth.py --save wrote")
    ap.add_argument("--aa", type=Path, help="a second run of the same scenarios (A/A floor)")
    args = ap.parse_args()
    truth = orjson.loads((args.runs / "truth.json").read_bytes())
    right, total = scenarios(args.runs, truth)
    print(f"\nlimiter right in {right} of {total} scenarios")
    cross(args.runs, args.aa)


if __name__ == "__main__":
    main()
