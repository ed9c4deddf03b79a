"""Memory for `trace_replay.py`: a 1-million-line Mooncake trace, each measurement in a
fresh process (peak resident memory, `ru_maxrss`): the whole file loaded as a list
(the reference a replay that reads everything first would be), infersight's checking
pass and its streamed schedule building every request's body, and `infersight bench
--trace` end to end on the last seconds of the trace (the whole file is checked and
read through; those requests are sent to a fake server)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

_RSS = "import resource; print('RSS', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"


def big_trace(path: Path, n: int, seed: int = 0) -> float:
    """A Mooncake-shaped trace at 100 req/s (Poisson): 1 to 8 blocks of 512 tokens
    whose ids overlap between requests; returns its span in seconds."""
    rng = np.random.default_rng(seed)
    gaps = rng.exponential(10.0, size=n)  # ms
    blocks = rng.integers(1, 9, size=n)
    first = rng.integers(0, 20_000, size=n)
    outs = rng.integers(1, 600, size=n)
    cut = rng.integers(0, 400, size=n)
    t = 0.0
    with path.open("w") as f:
        for i in range(n):
            t += float(gaps[i])
            b = int(blocks[i])
            f.write(
                json.dumps(
                    {
                        "timestamp": round(t, 3),
                        "input_length": b * 512 - int(cut[i]),
                        "output_length": int(outs[i]),
                        "hash_ids": list(range(int(first[i]), int(first[i]) + b)),
                    }
                )
                + "\n"
            )
    return t / 1000.0


def _measure(code: str) -> tuple[float, float, str]:
    """(peak RSS in MiB, seconds, the child's last line before its RSS)."""
    t0 = time.monotonic()
    r = subprocess.run(
        [sys.executable, "-c", code + "\n" + _RSS], capture_output=True, text=True, timeout=3600
    )
    wall = time.monotonic() - t0
    lines = r.stdout.strip().splitlines()
    rss = next((int(x.split()[1]) for x in lines if x.startswith("RSS ")), 0)
    info = next((x for x in reversed(lines) if not x.startswith("RSS ")), r.stderr[-200:])
    return rss / 1024.0, wall, info


def load_all(path: Path) -> tuple[float, float, str]:
    return _measure(
        f"import json\nrows = [json.loads(x) for x in open({str(path)!r})]\n"
        "print(len(rows), 'rows in memory')"
    )


def stream_all(path: Path) -> tuple[float, float, str]:
    return _measure(
        "from infersight.bench.replay.check import check_trace\n"
        "from infersight.bench.replay.feed import RequestShape, TraceFeed\n"
        f"s = check_trace({str(path)!r})\n"
        "words = tuple('the of and to in is was for on are as with his they at be'.split())\n"
        "shape = RequestShape(words, 0, 'm', 'chat', True, False)\n"
        "feed = TraceFeed(s.path, s.fmt, s.max_latency, s.origin, None, 1.0, shape)\n"
        "n = chars = 0\n"
        "for item in feed.items():\n"
        "    n += 1\n"
        "    chars += len(item.body['messages'][0]['content'])\n"
        "print(n, 'bodies built,', chars // n, 'characters each on average')"
    )


def bench_window(path: Path, url: str, span: float, last_s: float) -> tuple[float, float, str]:
    start = max(0.0, span - last_s)
    return _measure(
        "import sys\nfrom infersight.cli import main\n"
        f"sys.argv = ['infersight', 'bench', '--url', {url!r}, '--trace', {str(path)!r},"
        f" '--window', '{start:.3f}s-', '--no-progress', '--no-diagnose', '--no-scrape']\n"
        "try:\n    main()\nexcept SystemExit as e:\n    print('exit', e.code)"
    )
