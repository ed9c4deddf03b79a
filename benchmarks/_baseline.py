"""The ``src`` folder of another revision, for benchmarks that run it side by side.

``baseline_src("main")`` exports the revision's ``src`` with ``git archive`` into a
temporary folder (removed at exit) and returns it; put it first on ``PYTHONPATH`` to run
that revision's code with this checkout's virtual environment.
"""

from __future__ import annotations

import atexit
import io
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

__all__ = ["baseline_src"]

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
