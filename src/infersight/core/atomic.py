"""Writing a file so that a reader never sees half of it."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["write_atomic"]


def write_atomic(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to a temporary file beside ``path`` and rename it into place (an
    interrupted write never leaves junk); creates the parent folders."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(f".{p.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    tmp.replace(p)
    return p
