"""``tune --ray`` against the serial tune (issue 34, docs/design.md section 8): the same
grid over 8 slot settings of a fake server launched per trial (a compute knee at K = 4,
the SLO ``tpot_p99 < 1.4 x ITL``: the cheapest best setting is K), run once serially on
this machine and once on a real two-node local Ray cluster (``ray start --head`` plus a
node joined with ``ray start --address``, 1 CPU each), one trial per node at a time.

Prints each run's wall time (the tune command's own, and the process's), their ratio
(goal <= 0.6), each run's choice, and how the parallel run's trials fell on the nodes,
with each node's own A/A floor.

    .venv/bin/python benchmarks/tune_ray.py [--duration 3]

The cluster's start-up is not counted (the serial run goes first, while nothing else
runs; the cluster is then started and stays idle until the parallel run).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from infersight.core.listen import free_port
from infersight.core.tune_result import TuneResult, load_tune_result
from infersight_testkit.ray_cluster import LocalRayCluster

KNEE, ITL, TTFT, TOKENS = 4, 0.02, 0.02, 8
TEMPLATE = (
    f"{sys.executable} -m infersight_testkit.fake.openai --port {{port}} "
    f"--slots {{slots}} --compute-knee {KNEE} --ttft {TTFT} --itl {ITL} "
    f"--tokens {TOKENS} --metrics-dialect vllm"
)


def ray_cli() -> str:
    found = shutil.which("ray") or str(Path(sys.executable).parent / "ray")
    if not os.access(found, os.X_OK):
        sys.exit("tune_ray: the ray program is missing: pip install 'infersight[ray]'")
    return found


def tune(out: Path, duration: float, *extra: str) -> tuple[TuneResult, float]:
    cmd = [
        sys.executable,
        "-c",
        "from infersight.cli import main; main()",
        "tune",
        "--launch",
        TEMPLATE,
        "--slots",
        "2",
        "--knob",
        "slots",
        "--values",
        "1,2,3,4,5,6,7,8",
        "--search",
        "grid",
        "--duration",
        f"{duration:g}s",
        "--max-tokens",
        str(TOKENS),
        "--input-tokens",
        "fixed:16",
        "--slo",
        f"tpot_p99<{1.4 * ITL * 1000:g}ms",
        "--start-timeout",
        "60s",
        "--no-progress",
        "--out",
        str(out),
        *extra,
    ]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        sys.exit(f"tune failed ({proc.returncode}): {proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return load_tune_result(out / "tune.json"), wall


def line(name: str, r: TuneResult, wall: float) -> str:
    chosen = (r.chosen or {}).get("slots")
    floor = f"{r.noise_floor:.1%}" if r.noise_floor is not None else "-"
    return (
        f"{name:8} wall {r.wall_s:6.1f} s (process {wall:6.1f} s)  trials {len(r.trials):2d}  "
        f"chosen slots {chosen}  stopped {r.stopped}  noise floor {floor}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=3.0, help="seconds per level")
    ap.add_argument("--trials", action="store_true", help="print every trial of both runs")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="tune-ray-") as tmp:
        serial, s_wall = tune(Path(tmp) / "serial", args.duration)
        print(line("serial", serial, s_wall), flush=True)
        with LocalRayCluster(ray_cli(), free_port()) as cluster:
            par, p_wall = tune(Path(tmp) / "ray", args.duration, "--ray", cluster.address)
        print(line("--ray", par, p_wall))
        if args.trials:
            for name, r in (("serial", serial), ("--ray", par)):
                t0 = min(t.started for t in r.trials)
                for t in r.trials:
                    obj = "-" if t.objective is None else f"{t.objective:.2f}"
                    print(
                        f"  {name:6} #{t.index:2d} {t.role:13} slots {t.setting['slots']} "
                        f"node {(t.node or '-')[:6]:6} start {t.started - t0:5.1f} s "
                        f"wall {t.wall_s:5.1f} s  objective {obj} slo_met {t.slo_met} "
                        f"tpot_p99 {t.tpot_p99}"
                    )
        print(
            f"wall ratio (--ray / serial): {par.wall_s / serial.wall_s:.2f} "
            f"(process: {p_wall / s_wall:.2f}); goal <= 0.6"
        )
        same = serial.chosen == par.chosen
        print(f"same choice: {same} (serial {serial.chosen}, --ray {par.chosen})")
        per = Counter(t.node for t in par.trials)
        for n in par.nodes:
            floor = n.get("noise_floor")
            print(
                f"  node {str(n['node_id'])[:12]} ({n['host']}, {n['comparable']}): "
                f"{per[n['node_id']]} trials, A/A floor "
                f"{'-' if floor is None else f'{floor:.1%}'}"
            )


if __name__ == "__main__":
    main()
