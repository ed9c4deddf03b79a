"""The ``src`` folder of another revision, for benchmarks that run it side by side.

``baseline_src("main")`` exports the revision's ``src`` with ``git archive`` into a
temporary folder (removed at exit) and returns it; put it first on ``PYTHONPATH`` to run
that revision's code with this checkout's virtual environment. ``read_at(rev, script,
args)`` runs a benchmark script so, and returns what it printed as JSON.
"""

from __future__ import annotations

import atexit
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["baseline_src", "read_at"]

ROOT = Path(__file__).resolve().parent.parent


def baseline_src(rev: str) -> Path:
    """A temporary copy of ``src`` as it is at git revision ``rev``."""
    tar = subprocess.run(
        ["git", "archive", rev, "src"], cwd=ROOT, capture_output=True, check=True
    ).stdout
    tmp = Path(tempfile.mkdtemp(prefix="infersight-base-"))
    atexit.register(shutil.rmtree, tmp, ignore_errors=True)
    with tarfile.open(fileobj=io.BytesIO(tar)) as tf:
        tf.extractall(tmp, filter="data")
    return tmp / "src"


def read_at(rev: str, script: str, args: list[str]) -> Any:
    """Run ``script`` with ``args`` on revision ``rev``'s src; its stdout, as JSON."""
    env = {**os.environ, "PYTHONPATH": str(baseline_src(rev))}
    out = subprocess.run(
        [sys.executable, script, *args], env=env, capture_output=True, check=True
    ).stdout
    return json.loads(out)
