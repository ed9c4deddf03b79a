"""Helpers for tests that run real programs on loopback: a free port, and where a
program this project does not ship is installed. A module of its own (not conftest) so
test modules in any folder can import it by a name no other file has."""

from __future__ import annotations

import os
import shutil
import socket
import sys
from pathlib import Path

__all__ = ["REQUIRE_REAL_PARTS", "TOOL_VENVS", "free_port", "real_part_path"]

#: Set to 1 (CI, scripts/test.sh) to fail, not skip, tests whose real parts are missing.
REQUIRE_REAL_PARTS = "INFERSIGHT_REQUIRE_REAL_PARTS"
#: The benchmark tools' own venvs (``scripts/setup.sh --tools``): ``NAME/bin/NAME``.
TOOL_VENVS = Path(__file__).resolve().parents[1] / ".tool-venvs"


def free_port() -> int:
    """A free TCP port on 127.0.0.1 (for servers that need it before binding)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def real_part_path(name: str) -> str | None:
    """Where a program is installed (PATH, this Python's own bin (a venv's console
    scripts, such as ``ray``), a tool venv of its own (``.tool-venvs/NAME/bin/NAME``),
    then /usr/bin and /usr/sbin), or None."""
    found = shutil.which(name)
    if found:
        return found
    for d in (
        str(Path(sys.executable).parent),
        str(TOOL_VENVS / name / "bin"),
        "/usr/bin",
        "/usr/sbin",
    ):
        p = Path(d) / name
        if p.is_file() and os.access(p, os.X_OK):
            return str(p)
    return None
