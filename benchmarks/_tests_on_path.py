"""Importing this puts the repository's ``tests/`` folder on ``sys.path``, so a
benchmark can use the test helpers in ``tests/support`` (a real redis-server, a local
Ray cluster, real-time scheduling) that the wheel does not ship."""

import sys
from pathlib import Path

_TESTS = str(Path(__file__).resolve().parents[1] / "tests")
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)
