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
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import settings

from realparts import REQUIRE_REAL_PARTS, real_part_path

# Hypothesis's default 200 ms deadline per example is a wall-clock assert: on two busy
# cores a property test failed on it with nothing wrong. Examples are judged on their
# results alone.
settings.register_profile("infersight", deadline=None)
settings.load_profile("infersight")

#: Missing program -> ids of the tests skipped for it (for the summary).
_skipped: dict[str, list[str]] = {}


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
