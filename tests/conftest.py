"""Shared fixtures. The real embedded engine is started once per test session.

Real parts: tests that need a program this project does not ship (prometheus,
promtool, chromium, redis-server...) say so with ``@pytest.mark.needs("prometheus")``.
When one is missing, a plain local ``pytest`` skips those tests and lists them at the
end of its summary; with ``INFERSIGHT_REQUIRE_REAL_PARTS=1`` (set by
``scripts/test.sh``, the CI entry point) they fail instead, so CI never passes by
skipping what it claims to test.
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

#: Set to 1 (CI, scripts/test.sh) to fail, not skip, tests whose real parts are missing.
REQUIRE_REAL_PARTS = "INFERSIGHT_REQUIRE_REAL_PARTS"

#: Missing program -> ids of the tests skipped for it (for the summary).
_skipped: dict[str, list[str]] = {}


def free_port() -> int:
    """A free TCP port on 127.0.0.1 (for servers that need it before binding)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def real_part_path(name: str) -> str | None:
    """Where a program is installed (PATH, this Python's own bin (a venv's console
    scripts, such as ``ray``), then /usr/bin and /usr/sbin), or None."""
    found = shutil.which(name)
    if found:
        return found
    for d in (str(Path(sys.executable).parent), "/usr/bin", "/usr/sbin"):
        p = Path(d) / name
        if p.is_file() and os.access(p, os.X_OK):
            return str(p)
    return None


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "needs(*programs): real programs the test runs (prometheus, promtool, chromium, "
        f"redis-server, ray); missing ones skip it, or fail it when {REQUIRE_REAL_PARTS}=1",
    )


def pytest_runtest_setup(item: pytest.Item) -> None:
    names = [str(n) for mark in item.iter_markers("needs") for n in mark.args]
    missing = [n for n in dict.fromkeys(names) if real_part_path(n) is None]
    if not missing:
        return
    msg = f"real part missing: {', '.join(missing)} (not installed)"
    if os.environ.get(REQUIRE_REAL_PARTS) == "1":
        pytest.fail(f"{msg}; {REQUIRE_REAL_PARTS}=1 requires it", pytrace=False)
    for n in missing:
        _skipped.setdefault(n, []).append(item.nodeid)
    pytest.skip(msg)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _skipped:
        return
    tr = terminalreporter
    tr.write_sep("=", "tests skipped because real parts are missing", yellow=True)
    for name, ids in sorted(_skipped.items()):
        tr.write_line(f"{name}: {len(ids)} test(s), e.g. {ids[0]}")
    tr.write_line(f"(CI sets {REQUIRE_REAL_PARTS}=1, which fails these tests instead)")


@pytest.fixture(scope="session")
def engine() -> Iterator[Any]:
    """The real embedded llama.cpp engine (SmolLM2-135M, 8 slots), shared by the session."""
    from infersight.engine import EmbeddedEngine

    with EmbeddedEngine(parallel=8, ctx=8192) as eng:
        yield eng
