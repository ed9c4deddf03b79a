"""Helpers for tests that run real programs on loopback: where a
program this project does not ship is installed. A module of its own (not conftest) so
test modules in any folder can import it by a name no other file has."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

__all__ = ["REQUIRE_REAL_PARTS", "TOOL_VENVS", "real_part_path"]

#: Set to 1 (CI, scripts/test.sh) to fail, not skip, tests whose real parts are missing.
REQUIRE_REAL_PARTS = "INFERSIGHT_REQUIRE_REAL_PARTS"
#: The benchmark tools' own venvs (``scripts/setup.sh --tools``): ``NAME/bin/NAME``.
TOOL_VENVS = Path(__file__).resolve().parents[1] / ".tool-venvs"


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
