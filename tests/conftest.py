"""Shared fixtures. The real embedded engine is started once per test session."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest


def free_port() -> int:
    """A free TCP port on 127.0.0.1 (for servers that need it before binding)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture(scope="session")
def engine() -> Iterator[Any]:
    """The real embedded llama.cpp engine (SmolLM2-135M, 8 slots), shared by the session."""
    from infersight.engine import EmbeddedEngine

    with EmbeddedEngine(parallel=8, ctx=8192) as eng:
        yield eng
