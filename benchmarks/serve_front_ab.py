"""Did a change to `serve`'s validating front make it cheaper? Two revisions side by side.

The front at a base revision (``git archive`` of its ``src/``) and the front in this
working tree run as two processes in front of one embedded llama.cpp engine. The same
requests go to each in alternating blocks, so drift on a shared machine hits both
alike; the CPU each front's process spent per request is read from
``/proc/<pid>/task/*/schedstat`` (median over blocks).

On this 2-core box the run-to-run spread of ``serve_front_overhead.py`` (about ±30 us
for a chat request, more for streams) hides changes of that size. Comparing on one
engine in alternating blocks narrows it, but not to nothing: read the noise floor from
an A/A run first (``--base HEAD`` with the front unchanged; with ``--quick`` it showed up
to ±100 us per stream, with 16 blocks about ±20 us per request), and repeat a run
before believing a difference near it.

    python benchmarks/serve_front_ab.py --base HEAD~1 --quick    # about a minute
    python benchmarks/serve_front_ab.py --base HEAD~1            # about 3 minutes
    python benchmarks/serve_front_ab.py --base 83f909c --blocks 24
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

from infersight.core.processes import stop_process
from infersight.engine import EmbeddedEngine
from serve_front_overhead import Case, _cpu_ns, _request, run_block

ROOT = Path(__file__).resolve().parent.parent


def export_src(rev: str, into: Path) -> Path:
    """``src/`` as it was at ``rev``, unpacked under ``into``."""
    data = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "src"], check=True,
                          capture_output=True).stdout
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        tar.extractall(into, filter="data")
    return into / "src"


#: A front process: the revision's ``src`` goes first on the path before anything of
#: infersight is imported ("-": the installed working tree).
_CHILD = """
import sys
src, port, model = sys.argv[1], int(sys.argv[2]), sys.argv[3]
if src != "-":
    sys.path.insert(0, src)
from infersight.gateway import front
if src != "-" and not front.__file__.startswith(src):
    raise SystemExit("the base revision's front was not the one imported")
cfg = front.FrontConfig(engine_host="127.0.0.1", engine_port=port,
                        engine_key=sys.stdin.readline().strip(), model=model, port=0)
front.run_front(cfg, on_ready=lambda f: print(f"port {f.port}", flush=True),
                alive=lambda: True)
"""


def start_front(src: str, engine: EmbeddedEngine, key: str) -> tuple[int, subprocess.Popen[str]]:
    proc = subprocess.Popen(
        [sys.executable, "-c", _CHILD, src, str(engine.port), engine.model_name],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=str(ROOT),
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(key + "\n")  # never on the command line
    proc.stdin.flush()
    line = proc.stdout.readline()
    if not line.startswith("port "):
        stop_process(proc, 10)
        raise SystemExit(f"a front did not start: {line!r}")
    return int(line.split()[1]), proc


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default="HEAD", help="the revision to compare against (HEAD)")
    ap.add_argument("--blocks", type=int, default=16, help="alternating blocks (16)")
    ap.add_argument("--quick", action="store_true", help="6 blocks, about a minute")
    args = ap.parse_args()
    if args.quick:
        args.blocks = 6
    key = secrets.token_urlsafe(32)
    with tempfile.TemporaryDirectory() as tmp, \
            EmbeddedEngine(parallel=2, ctx=2048, api_key=key) as engine:
        base_src = export_src(args.base, Path(tmp))
        chat = {"model": engine.model_name,
                "messages": [{"role": "user", "content": "Count to 20"}]}
        cases = [
            (Case("GET /health", "GET", "/health"), 200),
            (Case("POST /tokenize", "POST", "/tokenize",
                  json.dumps({"content": "The quick brown fox " * 8}).encode()), 200),
            (Case("chat, 1 token", "POST", "/v1/chat/completions",
                  json.dumps({**chat, "max_tokens": 1}).encode()), 40),
            (Case("chat stream, 16 tokens", "POST", "/v1/chat/completions",
                  json.dumps({**chat, "max_tokens": 16, "stream": True, "temperature": 0,
                              "ignore_eos": True}).encode()), 6),
        ]
        fronts = {"base": start_front(str(base_src), engine, key),
                  "tree": start_front("-", engine, key)}
        try:
            cpu: dict[tuple[str, str], list[float]] = {}
            for c, _ in cases:  # warm both (connections, caches, the prompt cache)
                for port, _ in fronts.values():
                    run_block(port, _request(c, None), 3)
            for b in range(args.blocks):
                for c, n in cases:
                    for side in (["base", "tree"] if b % 2 else ["tree", "base"]):
                        port, proc = fronts[side]
                        c0 = _cpu_ns(proc.pid)
                        run_block(port, _request(c, None), n)
                        cpu.setdefault((c.name, side), []).append((_cpu_ns(proc.pid) - c0) / 1e3 / n)
        finally:
            for _, proc in fronts.values():
                stop_process(proc, 10)
    print(f"\nfront CPU per request, median of {args.blocks} alternating blocks "
          f"({os.cpu_count()} CPUs); base = {args.base}, tree = this working tree\n")
    print(f"{'request':<26} {'base':>9} {'tree':>9} {'tree-base':>10}")
    for c, _ in cases:
        base = statistics.median(cpu[(c.name, "base")])
        tree = statistics.median(cpu[(c.name, "tree")])
        print(f"{c.name:<26} {base:>7.0f}us {tree:>7.0f}us {tree - base:>+8.0f}us")


if __name__ == "__main__":
    main()
