"""Fixtures for gateway tests (helpers live in gateway_stack.py)."""

from __future__ import annotations

import pytest
from gateway_stack import StackFactory, stack_factory


@pytest.fixture
def make_stack() -> StackFactory:
    """``async with make_stack([FakeConfig(...), ...], upstreams=[{...}], **cfg) as s``."""
    return stack_factory()
