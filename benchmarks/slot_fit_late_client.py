"""The slot fit against a client that stamps late: ``vllm bench serve`` files made by the
real tool against real vLLM at ``--max-num-seqs 2`` (closed loop, ``--max-concurrency 8``,
16 requests of 32 + 32 tokens), read as made and with the ends that freed a slot for a
waiting request stamped late, as a client short of CPU stamps them (on 2 cores shared with
the server it does: two such ends read 3 slots in fresh-clone CI).

    .venv/bin/python benchmarks/slot_fit_late_client.py --make 4 --keep DIR
    .venv/bin/python benchmarks/slot_fit_late_client.py DIR/*.json --baseline 2e4e356

Each file's fitted slot limit (the truth is 2) with 0, 1, 2, 3, 5 and 10 ends made late
by ``--delay`` (a share of the run's fastest first token, 0.4 by default: about 50 ms
here), for this checkout and, with ``--baseline REV``, for that revision's ``src`` in
the same run.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np

from _baseline import read_at
from infersight.importers import import_file
from infersight.servermodel.admission import reconstruct
from infersight.servermodel.data import run_data
from infersight.servermodel.limits import find_slots
from infersight_testkit.tool_runs import run_vllm_bench
from infersight_testkit.vllm_server import VLLMServer, VLLMSetting, vllm_model_dir

LATE = (0, 1, 2, 3, 5, 10)


def fitted(path: Path, late: int, delay: float) -> float | None:
    """The slot limit fitted to ``path`` with ``late`` freeing ends stamped late."""
    d = run_data(import_file(path))
    use = np.flatnonzero(d.ok & np.isfinite(d.first) & np.isfinite(d.end))
    sent, end, first = d.sent[use], d.end[use], d.first[use]
    floor = float(np.min(first - sent))
    start = reconstruct(sent, end, 2, first=first)
    moved = d.end.copy()
    for j in np.flatnonzero(start > sent + 0.5 * floor)[:late]:
        freed = int(np.argmin(np.abs(end - start[j])))  # the end its slot waited on
        moved[use[freed]] += delay * floor
    return find_slots(replace(d, end=moved), use).value


def table(files: list[Path], delay: float) -> dict[str, list[float | None]]:
    return {str(f): [fitted(f, k, delay) for k in LATE] for f in files}


def make(n: int, folder: Path) -> list[Path]:
    tok = vllm_model_dir()
    assert tok is not None, "prepare the model: scripts/setup.sh --tools"
    out = []
    with VLLMServer(VLLMSetting(max_num_seqs=2)) as server:
        for i in range(n):
            out.append(
                run_vllm_bench(
                    server.url,
                    folder / f"c8_{i}.json",
                    model=server.model,
                    tokenizer=tok,
                    prompts=16,
                    input_len=32,
                    output_len=32,
                    max_concurrency=8,
                )
            )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*", type=Path)
    ap.add_argument("--make", type=int, default=0, help="make this many files first")
    ap.add_argument("--keep", type=Path, help="where made files go (default: a temp folder)")
    ap.add_argument("--delay", type=float, default=0.4)
    ap.add_argument("--baseline", help="also fit with this revision's src")
    ap.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    files = list(a.files)
    if a.make:
        folder = (a.keep or Path(tempfile.mkdtemp(prefix="slot-fit-"))).resolve()
        folder.mkdir(parents=True, exist_ok=True)
        files += make(a.make, folder)
    if not files:
        ap.error("give vllm bench serve files, or --make N")
    ours = table(files, a.delay)
    if a.json:
        print(json.dumps(ours))
        return
    base: dict[str, list[float | None]] = {}
    if a.baseline:
        args = [*map(str, files), "--delay", str(a.delay), "--json"]
        base = read_at(a.baseline, __file__, args)
    late = f"{a.delay:g} x the fastest first token"
    print(f"fitted slots (truth 2) with k freeing ends stamped {late} late")
    print("file".ljust(14) + "".join(f"k={k}".rjust(12) for k in LATE))
    for f in files:
        row = [
            f"{v:g}" + (f" ({b:g})" if b is not None else "")
            for v, b in zip(ours[str(f)], base.get(str(f), [None] * len(LATE)), strict=True)
        ]
        print(f.name.ljust(14) + "".join(r.rjust(12) for r in row))
    if base:
        print(f"(in brackets: {a.baseline})")


if __name__ == "__main__":
    main()
